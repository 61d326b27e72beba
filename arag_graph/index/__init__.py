"""The hierarchical index: corpus in, chunks, keywords and sentence vectors on disk, searched.

Imports only :mod:`arag_graph.core`.
"""
