"""The store: the only code that writes SQL. Callers own the transaction (see
`models.db.unit_of_work`); nothing here commits."""

from models.store import assembly_reads, context_items, conversations, jobs, memories

__all__ = ["assembly_reads", "context_items", "conversations", "jobs", "memories"]
