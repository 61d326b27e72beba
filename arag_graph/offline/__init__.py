"""The offline policy: the tool-calling no-LLM model and the rules every family's offline answers share.

Not a language model; see :mod:`arag_graph.offline.policy`. Imports the layers below it: retrievers,
qa, index, core.
"""
