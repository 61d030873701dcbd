"""memlane's domain as pure functions: no database, network, clock or environment reads."""
