"""The HTTP front door: the FastAPI app and its routes (app), its error shape (errors) and its
Prometheus metrics (metrics). Serve it with `memlane serve`."""

from memlane.config.extras import EMBEDDED_MODULES, SERVER_MODULES, require

require("memlane.api (the HTTP server)", "server", *SERVER_MODULES, *EMBEDDED_MODULES)
