"""Title-lookup questions for the 2Wiki corpus, derived from its passages by one fixed rule.

The 2Wiki corpus in data ships without questions. To measure retrieval on it without
writing (or tuning) questions by hand, every question comes from a passage by this rule, decided
before any measurement and never changed after:

1. the passages with at least two sentences (the package's sentence splitter), in corpus order;
2. ``random.Random(SEED)`` samples ``N`` of them, and for each one sentence other than the first
   (the first usually repeats the title, so it would be found by the title alone);
3. the *fragment* is that sentence's first 60% of words (at least 4): the rest is the "answer";
4. two questions per passage: ``"<title>: <fragment>"`` (``title`` type: an entity and a fact
   about it, as multi-hop sub-questions read) and the fragment alone (``fragment`` type: what
   plain sentence matching is best at, to show whether headers cost anything there).

The gold passage is the one the sentence came from (HotpotQA-style ``supporting_facts``; 2Wiki
titles are unique in this corpus, checked below).

    python bench/make_2wiki_lookup.py     # writes bench/data/2wiki-lookup.json
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
from pathlib import Path

from benchenv import DATA, ROOT

from arag_graph.core.sentences import split_sentences

SEED = 14
N = 200
FRACTION = 0.6
DATA = DATA
OUT = ROOT / "bench" / "data" / "2wiki-lookup.json"


def fragment(sentence: str) -> str:
    words = sentence.split()
    return " ".join(words[: max(4, math.ceil(FRACTION * len(words)))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DATA / "2wiki-corpus" / "corpus.json")
    args = parser.parse_args()
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    counts = collections.Counter(p["title"] for p in corpus)
    if max(counts.values()) > 1:
        raise SystemExit("titles repeat in this corpus: the gold passage would be ambiguous")
    candidates = [(p["title"], split_sentences(p["text"])) for p in corpus]
    candidates = [(t, s) for t, s in candidates if len(s) >= 2]
    rng = random.Random(SEED)
    questions = []
    for n, (title, sentences) in enumerate(rng.sample(candidates, N)):
        position = rng.randrange(1, len(sentences))
        sentence = sentences[position].strip()
        part = fragment(sentence)
        answer = sentence[len(part) :].strip()
        for kind, text in (("title", f"{title}: {part}"), ("fragment", part)):
            questions.append(
                {
                    "_id": f"2wl-{n:03d}-{kind}",
                    "question": text,
                    "answer": answer,
                    "type": kind,
                    "supporting_facts": [[title, position]],
                }
            )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(questions, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(questions)} questions from {N} passages (seed {SEED}) -> {OUT}")


if __name__ == "__main__":
    main()
