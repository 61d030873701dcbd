"""The MCP front door: memlane as a Model Context Protocol server (server)."""
