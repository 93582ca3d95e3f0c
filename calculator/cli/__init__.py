"""python -m calculator: the entry point, one module per command, the MCP tools over the same commands."""
