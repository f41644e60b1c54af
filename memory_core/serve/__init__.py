"""Serving: retrieval over an in-memory index of each namespace's cards, use recording, keys,
and the service object the read API and the MCP server both call. The modules sit in one-way
layers, low to high: shapes, needs, cards, index, walk, snapshot, retrieval, cache, service
(the README's serving section)."""
