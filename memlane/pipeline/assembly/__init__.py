"""Assembly: the token budget, the assembler and its parts, the format contract of a context
block, token counting, and the exact walk over a working set's ranked rows."""
