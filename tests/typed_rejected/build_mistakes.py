"""Calls of ``build_index`` mypy must REJECT (tests/test_typing.py; the rule is context_mistakes.py's:
each line whose comment starts `rejected:` must be a mypy error whose line contains the rest of that
comment, and no other line may be one). Never run, only checked.

Before the build settings were explicit keyword parameters, ``build_index`` took ``**changes: Any``
and a misspelt setting passed mypy (issue 37).
"""

from __future__ import annotations

from arag_graph import BuildOptions, build_index

build_index("corpus.jsonl", "indexes/mine", progress=True)
build_index("corpus.jsonl", "indexes/mine", progres=True)  # rejected: [call-arg]
build_index("corpus.jsonl", "indexes/mine", chunk_size=512, keyword_match="substring")
build_index("corpus.jsonl", "indexes/mine", chunk_sise=512)  # rejected: [call-arg]
build_index("corpus.jsonl", "indexes/mine", chunk_size="512")  # rejected: [arg-type]
build_index("corpus.jsonl", "indexes/mine", keyword_match="prefix")  # rejected: [arg-type]
build_index("corpus.jsonl", "indexes/mine", BuildOptions(chunk_size=512), chroma_timeout=5.0)
