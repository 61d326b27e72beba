"""One-shot retrieval over an index (dense, BM25, hybrid, windows, AMR, DSI) and the LangChain retriever.

Imports the layers below it: index, qa, core.
"""
