"""The use cases behind every front door: the facade (`Memlane`) and what it delegates to
(assembly, memory curation, context items, transfer, jobs, search), with the checks and
background work they share. Imports no front door."""

from memlane.config.extras import EMBEDDED_MODULES, require

require("memlane.service (the Memlane facade)", "embedded", *EMBEDDED_MODULES)
