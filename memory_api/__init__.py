"""The read API and MCP server (thin layers over memory_core); see the serving issue."""
