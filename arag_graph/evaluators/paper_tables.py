"""The numbers the papers report, in one place, each with where it comes from.

``arag reproduce`` (:mod:`arag_graph.evaluators.reproduce`) prints them beside ours, and the
ARAGOG grid (:mod:`arag_graph.evaluators.grid`) reads its reference figures from here. Source: our
notes on the papers (``papers.md``, written from the papers themselves); a number the notes do not
hold is not here, and its cell reads "—". Accuracies are percentages as the papers print them,
F1 and ARAGOG's scores fractions, retrieved tokens per question.

Datasets are named ``musique``, ``hotpotqa`` and ``2wiki`` (:func:`dataset_of` reads them from a
file name).
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ARAGOG_CHUNK_SIZE",
    "ARAGOG_EMBEDDINGS",
    "ARAGOG_SCORES",
    "ARAG_LLM_ACC",
    "ARAG_SCALING",
    "ARAG_TOKENS",
    "CITATIONS",
    "CORAG_EM",
    "DATASETS",
    "SETTINGS",
    "SRAG_ABLATION_F1",
    "SRAG_F1",
    "SRAG_HOPS_F1",
    "dataset_of",
]

DATASETS: dict[str, str] = {"musique": "MuSiQue", "hotpotqa": "HotpotQA", "2wiki": "2Wiki"}

ARAG = "A-RAG (Du et al., 2026, arXiv 2602.03442)"
CORAG = "CoRAG (Wang et al., 2025, arXiv 2502.09601)"
SRAG = "SRAG (arXiv 2412.04235)"
ARAGOG = "ARAGOG (Blagaj et al., 2024, arXiv 2404.16130)"

ARAG_LLM_ACC: dict[str, dict[str, dict[str, float]]] = {
    # A-RAG, main results table: LLM-Acc (%) by backbone, method and dataset.
    "gpt-4o-mini": {
        "Naive RAG": {"musique": 38.6, "hotpotqa": 74.5, "2wiki": 42.6},
        "A-RAG (Naive)": {"musique": 43.8, "hotpotqa": 76.6, "2wiki": 52.3},
        "A-RAG (Full)": {"musique": 46.1, "hotpotqa": 77.1, "2wiki": 60.2},
    },
    "gpt-5-mini": {
        "Naive RAG": {"musique": 52.8, "hotpotqa": 81.2, "2wiki": 50.2},
        "A-RAG (Naive)": {"musique": 66.2, "hotpotqa": 90.8, "2wiki": 70.6},
        "A-RAG (Full)": {"musique": 74.1, "hotpotqa": 94.5, "2wiki": 89.7},
    },
}

ARAG_TOKENS: dict[str, dict[str, float]] = {
    # A-RAG, retrieved tokens per question (GPT-5-mini backbone).
    "Naive RAG": {"musique": 5387, "hotpotqa": 5358, "2wiki": 5506},
    "GraphRAG": {"musique": 9234, "hotpotqa": 8744, "2wiki": 4201},
    "A-RAG (Naive)": {"musique": 56360, "hotpotqa": 27455, "2wiki": 45406},
    "A-RAG (Full)": {"musique": 5663, "hotpotqa": 2737, "2wiki": 2930},
}

ARAG_SCALING: dict[str, str] = {
    # A-RAG, test-time scaling on the first 300 MuSiQue questions: gains in LLM-Acc points, as reported
    # (approximate; the paper gives them as curves).
    "steps": "about +8 (GPT-5-mini) and +4 (GPT-4o-mini) from a cap of 5 to 20",
    "effort": "about +25 from minimal to high reasoning effort",
}

CORAG_EM: dict[str, dict[str, float]] = {
    # CoRAG, EM (%) by chain length and the baselines it compares with.
    "Naive RAG": {"hotpotqa": 42.3, "2wiki": 38.7, "musique": 25.1},
    "IRCoT": {"hotpotqa": 53.1, "2wiki": 48.9, "musique": 35.4},
    # S=1 and S=2: HotpotQA only (the chain-length figure as issue 35's audit of the paper read it).
    "CoRAG S=1": {"hotpotqa": 44.1},
    "CoRAG S=2": {"hotpotqa": 51.3},
    "CoRAG S=3": {"hotpotqa": 55.8, "2wiki": 51.2, "musique": 38.7},
    "CoRAG S=5": {"hotpotqa": 57.2, "2wiki": 52.8, "musique": 40.1},
}

SRAG_F1: dict[str, dict[str, float]] = {
    # SRAG, F1 (fraction) of SRAG and the baselines it compares with.
    "SRAG": {"musique": 0.421, "hotpotqa": 0.591, "2wiki": 0.638},
    "standard RAG": {"musique": 0.312, "hotpotqa": 0.518, "2wiki": 0.541},
    "IRCoT": {"musique": 0.389, "hotpotqa": 0.573, "2wiki": 0.612},
}

SRAG_ABLATION_F1: dict[str, dict[str, float]] = {
    # SRAG, ablation on MuSiQue only: F1 without each component.
    "w/o decomposition": {"musique": 0.337},
    "w/o structured extraction": {"musique": 0.372},
    "w/o table aggregation": {"musique": 0.393},
}

SRAG_HOPS_F1: dict[str, dict[str, float]] = {
    # SRAG, F1 by number of hops (MuSiQue, the set whose questions name their hops): standard RAG and SRAG.
    "standard RAG, 2 hops": {"musique": 0.45},
    "SRAG, 2 hops": {"musique": 0.56},
    "standard RAG, 3 hops": {"musique": 0.28},
    "SRAG, 3 hops": {"musique": 0.39},
    "standard RAG, 4 hops": {"musique": 0.18},
    "SRAG, 4 hops": {"musique": 0.24},
}

ARAGOG_SCORES: dict[str, tuple[float, float, float]] = {
    # ARAGOG's Context Precision / Answer Similarity / Answer Relevance (the Llama 2 technical report, 100 QA pairs).
    "naive RAG": (0.657, 0.886, 0.919),
    "+ SWR": (0.662, 0.887, 0.921),
    "+ AMR": (0.649, 0.884, 0.917),
    "+ DSI": (0.671, 0.888, 0.920),
    "+ HyDE": (0.701, 0.893, 0.924),
    "+ CCH": (0.694, 0.891, 0.922),
    "+ HyDE + CCH": (0.718, 0.897, 0.928),
}

ARAGOG_CHUNK_SIZE: dict[int, str] = {
    # ARAGOG's chunk-size comparison: the notes give its finding, not its scores.
    512: "best of the sizes compared",
}

ARAGOG_EMBEDDINGS = "the embedding models compared were within about 2% of each other (Context Precision)"
"""ARAGOG's embedding-model comparison: the notes give its finding, not a score per model."""

_ARAG_DATA = "LinearRAG's corpora and questions"
SETTINGS: dict[str, str] = {
    # The setting each paper's numbers were measured in (model, data, k), as far as our notes give it.
    "arag-main": f"GPT-4o-mini and GPT-5-mini backbones, judge GPT-5-mini, {_ARAG_DATA}, "
    "Qwen3-Embedding-0.6B, top-k 5, max_tokens >= 16,384",
    "arag-ablations": f"GPT-5-mini backbone (the ablation's backbone), judge GPT-5-mini, {_ARAG_DATA}, top-k 5",
    "arag-tokens": f"GPT-5-mini backbone, {_ARAG_DATA}, top-k 5, tokens counted with o200k_base",
    "arag-scaling": "GPT-5-mini and GPT-4o-mini backbones, first 300 MuSiQue questions, top-k 5, step caps 5 to 20",
    "arag-effort": "GPT-5-mini backbone, first 300 MuSiQue questions, top-k 5, reasoning effort minimal to high",
    "aragog-grid": "the Llama 2 technical report with 100 QA pairs; backbone and k not in our notes",
    "aragog-chunk-size": "the Llama 2 technical report with 100 QA pairs; backbone and k not in our notes",
    "aragog-embeddings": "the Llama 2 technical report with 100 QA pairs; backbone and k not in our notes",
    "corag-decoding": "CoRAG's model fine-tuned on rejection-sampled chains (name, data and k not in our notes)",
    "corag-chain-length": "CoRAG's model fine-tuned on rejection-sampled chains, EM (name and k not in our notes)",
    "srag-ablations": "SRAG's fine-tuned decomposer and extractor, F1 (backbone and k not in our notes)",
    "srag-hops": "SRAG's fine-tuned decomposer and extractor, MuSiQue by hop count, F1 "
    "(backbone and k not in our notes)",
}

CITATIONS: dict[str, str] = {
    "arag-main": f"{ARAG}, main results (LLM-Acc, GPT-4o-mini and GPT-5-mini backbones)",
    "arag-ablations": f"{ARAG}, ablation table (its numbers are not in our notes: Full is best on most sets, "
    "removing either search tool lowers accuracy, w/o chunk_read is below Full)",
    "arag-tokens": f"{ARAG}, retrieved tokens per question (GPT-5-mini backbone)",
    "arag-scaling": f"{ARAG}, test-time scaling: step cap (first 300 MuSiQue questions)",
    "arag-effort": f"{ARAG}, test-time scaling: reasoning effort (first 300 MuSiQue questions)",
    "aragog-grid": f"{ARAGOG}, comparison of retrieval techniques (Context Precision, Answer Similarity, "
    "Answer Relevance)",
    "corag-decoding": f"{CORAG}, decoding strategies (greedy, best-of-N, tree search; numbers not in our notes)",
    "corag-chain-length": f"{CORAG}, test-time scaling by chain length S (EM; S=1 and S=2 on HotpotQA only)",
    "srag-ablations": f"{SRAG}, main results (F1) and the ablation on MuSiQue",
    "srag-hops": f"{SRAG}, results by number of hops on MuSiQue (F1, standard RAG and SRAG; gains peak on 3-hop "
    "questions, 4+ hops stay hard)",
    "aragog-chunk-size": f"{ARAGOG}, chunk-size comparison (512-token chunks were best; scores not in our notes)",
    "aragog-embeddings": f"{ARAGOG}, embedding-model comparison (models within about 2%; scores not in our notes)",
}


def dataset_of(path: Path) -> str | None:
    """The paper dataset a question file holds, read from its name or its folder's (None: not one of them)."""
    text = f"{path.parent.name}/{path.stem}".lower().replace("_", "").replace("-", "")
    if "musique" in text:
        return "musique"
    if "hotpot" in text:
        return "hotpotqa"
    if "2wiki" in text or "wikimultihop" in text:
        return "2wiki"
    return None
