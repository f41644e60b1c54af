"""Serving: retrieval over an in-memory atom index, use recording, keys, and the service
object the read API and the MCP server both call."""
