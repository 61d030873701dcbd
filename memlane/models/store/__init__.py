"""The store: the only code that writes SQL, by what it keeps (memories, conversations,
users) and the read paths (reads). Callers own the transaction (see
`memlane.models.db.unit_of_work`); nothing here commits."""

from memlane.config.extras import EMBEDDED_MODULES, require

require("memlane.models.store", "embedded", *EMBEDDED_MODULES)
