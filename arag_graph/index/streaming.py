"""Encoding on a GPU: tokenize and pad on one thread while the model runs on another (issue 36).

A MiniLM forward pass on a GPU takes well under a millisecond for hundreds of sentences; what
limits the throughput is the CPU: tokenizing, padding, and Python launching the kernels. So
:func:`encode_streamed` has a producer thread tokenize :data:`STREAM_WINDOW` texts at a time (the
model's Rust tokenizer spreads a window over every core, with the GIL released), sort them by
token length (little padding) and pad batches of the encoder's ``batch_size`` into (pinned)
tensors, while the calling thread moves each batch to the device and runs the model on it.
Vectors are normalised on the device and copied back every :data:`FLUSH_BATCHES` batches, since
each copy waits for the GPU to finish. :class:`~arag_graph.index.encoders.SentenceEncoder` uses it
on a GPU (or when told to with ``stream=True``, as the tests do on the CPU).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from arag_graph.index.tokenizing import fast_tokenizer, valid_utf8

# The encoder is a SentenceEncoder, typed Any here: this module sits below arag_graph.index.encoders,
# which calls it.
SentenceEncoder = Any

# How many texts the tokenizing thread takes at once: the Rust tokenizer spreads a window over
# every core, and the window is sorted by token length before it is cut into batches.
STREAM_WINDOW = 16384
# Batches whose vectors are copied back to the host together (each copy waits for the GPU).
FLUSH_BATCHES = 16

Tokenize = Callable[[Sequence[str]], list[list[int]]]


def stream_tokenizer(encoder: SentenceEncoder) -> tuple[Tokenize, int]:
    """A function giving the token ids of texts (unpadded), and the pad id; kept on the encoder.

    The model's Rust tokenizer (``tokenizer.json``, as the ONNX encoder uses it) when the folder
    has one: it tokenizes a whole window on every core with the GIL released, so the thread that
    drives the GPU keeps running meanwhile. Else the model's own tokenizer.
    """
    if encoder._stream_tokenizer is None:
        fast = fast_tokenizer(encoder.folder)
        if fast is not None:
            tokenizer, _, pad_id = fast
            encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)

            def tokenize(texts: Sequence[str]) -> list[list[int]]:
                return [e.ids for e in encode(valid_utf8(texts), add_special_tokens=True)]

            encoder._stream_tokenizer = (tokenize, pad_id)
        else:
            model = encoder.model
            own = model.tokenizer

            def tokenize(texts: Sequence[str]) -> list[list[int]]:
                limit = int(model.max_seq_length)
                return own(list(texts), add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]

            encoder._stream_tokenizer = (tokenize, int(own.pad_token_id or 0))
    return encoder._stream_tokenizer


def padded_batch(tokenizer: Any, ids: list[list[int]], lengths: np.ndarray, rows: np.ndarray, pad_id: int) -> dict:
    """One batch's model inputs as CPU tensors, padded the side the model's ``tokenizer`` pads."""
    import torch

    names = [n for n in tokenizer.model_input_names if n in ("input_ids", "attention_mask", "token_type_ids")]
    sizes = lengths[rows]
    width = int(sizes.max())
    columns = np.arange(width)
    if getattr(tokenizer, "padding_side", "right") == "left":
        mask = columns >= (width - sizes)[:, None]
    else:
        mask = columns < sizes[:, None]
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    # Boolean assignment fills row by row, in order: exactly the rows' ids, one after another.
    input_ids[mask] = np.fromiter(itertools.chain.from_iterable(ids[i] for i in rows), np.int64, int(sizes.sum()))
    tensors = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(mask.astype(np.int64)),
        # one text per row: every token is in segment 0, as the tokenizer itself would say
        "token_type_ids": torch.zeros((len(rows), width), dtype=torch.int64),
    }
    return {name: tensors[name] for name in names or ("input_ids", "attention_mask")}


class _Batches:
    """The producer's side: tokenized, sorted, padded batches on a bounded queue, then ``None``
    (or the exception that stopped it), until :meth:`stop`."""

    def __init__(self, encoder: SentenceEncoder, texts: Sequence[str], pin: bool) -> None:
        self.encoder, self.texts, self.pin = encoder, texts, pin
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=8)
        self.stopped = threading.Event()

    def put(self, item: Any) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce(self) -> None:
        encoder = self.encoder
        try:
            tokenize, pad_id = stream_tokenizer(encoder)
            tokenizer = encoder.model.tokenizer
            for start in range(0, len(self.texts), STREAM_WINDOW):
                with encoder._tokenizer_lock:
                    ids = tokenize(self.texts[start : start + STREAM_WINDOW])
                lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                order = np.argsort(lengths, kind="stable")
                for first in range(0, len(order), encoder.batch_size):
                    rows = order[first : first + encoder.batch_size]
                    tensors = padded_batch(tokenizer, ids, lengths, rows, pad_id)
                    if self.pin:
                        tensors = {k: v.pin_memory() for k, v in tensors.items()}
                    if not self.put((start + rows, tensors)):
                        return
            self.put(None)
        except BaseException as exc:  # handed to the consumer, which raises it
            self.put(exc)

    def stop(self) -> None:
        self.stopped.set()


def encode_streamed(
    encoder: SentenceEncoder, texts: Sequence[str], on_batch: Callable[[int], None] | None
) -> np.ndarray:
    """Normalised float32 embeddings of ``texts``, in input order, encoded as a GPU wants it (above)."""
    import torch

    model = encoder.model
    device = model.device
    out = np.empty((len(texts), encoder.dimension), dtype=np.float32)
    if not texts:
        return out
    pin = device.type == "cuda"
    batches = _Batches(encoder, texts, pin)
    producer = None
    if len(texts) <= encoder.batch_size:  # a query: no thread to start
        batches.produce()
    else:
        producer = threading.Thread(target=batches.produce, name="arag-tokenize", daemon=True)
        producer.start()
    pending: list[tuple[np.ndarray, Any]] = []

    def flush() -> None:
        rows = np.concatenate([r for r, _ in pending])
        out[rows] = torch.cat([v for _, v in pending]).cpu().numpy()
        pending.clear()
        if on_batch is not None:
            on_batch(len(rows))

    try:
        with torch.inference_mode():
            while (item := batches.queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                rows, tensors = item
                inputs = {k: v.to(device, non_blocking=pin) for k, v in tensors.items()}
                vectors = model.forward(inputs)["sentence_embedding"]
                pending.append((rows, torch.nn.functional.normalize(vectors.float(), p=2, dim=1)))
                if len(pending) >= FLUSH_BATCHES:
                    flush()
            if pending:
                flush()
    finally:
        batches.stop()
        if producer is not None:
            producer.join()
    return out
