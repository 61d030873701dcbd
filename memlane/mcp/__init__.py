"""The MCP front door: memlane as a Model Context Protocol server (server)."""

from memlane.config.extras import EMBEDDED_MODULES, require

require("memlane.mcp (the MCP server)", "mcp", "mcp", *EMBEDDED_MODULES)
