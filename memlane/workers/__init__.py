"""memlane's worker fleet: the Celery app, thin tasks, and the model adapters."""
