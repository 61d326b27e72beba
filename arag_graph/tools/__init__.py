"""A-RAG's retrieval tools (keyword_search, semantic_search, chunk_read) and their MCP server.

They stand alone: imported, they load core and index only, so an app that wants the three tools for
its own agent loads no graph, model layer or offline policy.
"""
