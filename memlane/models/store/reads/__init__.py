"""The store's read paths: the assembler's candidate read, the dedup lookup, and a pack's
texts."""
