"""The read API and MCP server (thin layers over memory_core); see docs/serving.md."""
