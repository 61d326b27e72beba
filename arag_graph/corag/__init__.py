"""CoRAG: chain-of-retrieval (greedy, best-of-N, tree search) and rejection sampling of chains."""
