"""The A-RAG agent: its three retrieval tools, the tool-call guard and the graph."""
