"""The HTTP front door: the FastAPI app and its routes (app), its error shape (errors) and its
Prometheus metrics (metrics). Serve it with `memlane serve`."""
