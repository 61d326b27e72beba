"""Text, errors, files and secrets: what every layer above uses. Imports nothing else of arag_graph."""
