"""memlane's settings, queues and logging."""
