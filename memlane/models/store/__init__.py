"""The store: the only code that writes SQL. Callers own the transaction (see
`memlane.models.db.unit_of_work`); nothing here commits."""

from memlane.models.store import assembly_reads, context_items, conversations, jobs, memories

__all__ = ["assembly_reads", "context_items", "conversations", "jobs", "memories"]
