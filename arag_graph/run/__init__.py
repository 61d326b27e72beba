"""What every graph runs on: context schemas, the serving policy, state, runtime, nodes, pipeline.

Imports the layers below it: llm, retrieval, qa, index, core.
"""
