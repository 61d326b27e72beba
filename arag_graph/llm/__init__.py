"""Chat models, the typed backbone every graph asks, its prompts, and the offline policy.

Imports the layers below it: retrieval, qa, index, core.
"""
