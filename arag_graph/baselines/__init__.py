"""The papers' non-agentic baselines: Direct answer and Naive RAG."""
