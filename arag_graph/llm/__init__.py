"""What every graph family shares about models: building a chat model from a spec (OpenAI-compatible
endpoints, other providers, ``offline``), redaction of replies, a model request as a step, structured
outputs with their retries, and the document-summary writer. Each family's prompts, schemas and
model calls (chat and offline) are in its own folder.

Imports the layers below it: offline, retrievers, qa, index, core.
"""
