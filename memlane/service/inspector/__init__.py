"""The inspector's use cases (the /ui pages of memlane.api.ui): read-only views of what
memlane knows about a user and why a context held what it held. Every change the pages
make goes through the facade's own use cases (memlane.service.memories, .jobs), so the
API and the pages write the same history."""
