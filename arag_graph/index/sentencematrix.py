"""Exact sentence search over one float32 matrix: the sentence level of indexes small enough for it.

A-RAG's ``semantic_search`` is, in the paper, a brute force: multiply the query vector with every
sentence vector and keep each chunk's best sentence. The matrix does exactly that, and it is what
small and mid-sized indexes use: it is exact, costs nothing to build beyond writing the vectors,
opens instantly and needs no private copy when the index is read-only. Its lookup grows with the
corpus while an HNSW query through Chroma (ids and distances only) stays at a few milliseconds: on
one pinned core the lookups crossed between 4,000 and 21,000 sentences (0.68 against 1.47 ms at
4,112; 3.8 against 3.3 ms at 21,429; 13.6 against 2.4 ms at 100,000; bench/results/vs_paper.md).
The matrix is kept up to :data:`MATRIX_MAX_SENTENCES` nonetheless, because the build decides it:
filling Chroma costs 1.4 to 1.8 ms of CPU per sentence (176 s for 100,000 sentences from given
vectors, against 4.7 s for the matrix), which would take the 2Wiki build (21,429 sentences) from
0.43x to 0.54-0.58x of the paper's build time, past issue 16's 0.5x, while ``semantic_search`` with
the matrix, query encoding included, stays inside its target up to there (0.57x the paper's method
at 100,000 sentences). Above it the matrix's search tends to the brute force's own time, and Chroma
takes over (0.07x at 700,000 sentences, 0.05x at 1,000,000).

On disk the sentence level is one ``.npy`` file: row ``i`` is the vector of sentence ``i`` in corpus
order (chunk by chunk, sentence by sentence). Which chunk a row belongs to is not stored at all: it
follows from the chunk store's sentence counts (:class:`SentenceLayout`), the same counts that give
the sentence's text. The file is memory-mapped read-only, so processes serving the same index share
its pages, and threads can query it at once.

Scores are exact and the same on every path. A BLAS product gives a row a score that depends on
where the row sits (kernels take rows four at a time and finish the remainder another way), so two
equal sentences could score a last bit apart and a tie fall either way. The product of the whole
matrix therefore only *selects*: every row within :data:`FP32_SLACK` of the ``n``-th best
(:func:`candidates`) is scored again by :func:`exact_scores`, which depends on the row's values
alone, and those scores rank (equal ones in row order). A matrix held on a GPU in float16
(:class:`DeviceMatrix`) selects with a wider margin (:data:`FP16_SLACK`) and ranks with the same
exact scores from the memory-mapped file, so its results are the CPU's, ties included.

The build streams vectors into the file block by block (:class:`MatrixWriter`): an index build
never holds more than one block of vectors in memory, whatever the corpus size. The file is one of
the build's files like any other: its checksum is in the manifest and checked on every load
(:mod:`arag_graph.index.integrity`), and :meth:`SentenceMatrix.open` refuses a file whose header, size or
shape does not fit the chunks even without one; every failure is the one-line damage error.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import IndexDamagedError
from arag_graph.index.layout import load_index_array

MATRIX_FILE = "sentences.npy"
# Up to this many sentences an index keeps its vectors in one exact matrix by default; above it, in
# Chroma's HNSW (why here and not at the lookups' crossover: the module docstring).
MATRIX_MAX_SENTENCES = 100_000


# Rows read at once by a full check (about 6 MB of 384-dimensional vectors).
_CHECK_ROWS = 4096

# How far a selecting product may be from a unit row's exact score. float32 with float32
# accumulation over d terms errs by at most about d * 2**-24 * sum|q_i m_i| <= d * 6e-8 (2.3e-5
# for d = 384, far above what is seen); FP32_SLACK is that for d up to 1,600. float16 rows and query
# each err by 2**-11 relative (4.9e-4 in the product, by Cauchy-Schwarz), the float16 result by as
# much again, and a reduction in float16 by as much again: 2e-3 for any d, and FP16_SLACK doubles it.
FP32_SLACK = 1e-4
FP16_SLACK = 4e-3
# Rows scored exactly at once (a 12 MB float64 block of 384-d products).
_EXACT_ROWS = 4096
# Rows copied to a GPU at once when a matrix moves there (about 25 MB of float32 384-d vectors).
_DEVICE_ROWS = 1 << 14


def matrix_path(config: dict[str, Any], build_dir: Path, root: Path) -> Path:
    """The matrix file a manifest names, which must be a plain file name inside the build (a
    manifest can never point outside its index, nor through a symbolic link)."""
    name = config.get("path", MATRIX_FILE)
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise IndexDamagedError(
            root, f"the manifest puts the sentence vectors at {str(name)[:60]!r}, outside its build"
        )
    path = build_dir / name
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(path.lstat().st_mode):
            raise IndexDamagedError(
                root, f"the sentence vectors {path} are a symbolic link, which arag does not follow"
            )
    return path


class SentenceLayout:
    """Which chunk each sentence row belongs to, from the chunks' sentence counts.

    ``owner[i]`` is the position of sentence ``i``'s chunk in the chunk list and ``first[c]`` the
    row of chunk ``c``'s first sentence, so a row's position in its chunk is ``i - first[owner[i]]``.
    Shared by the matrix and by Chroma collections whose record ids are row numbers.
    """

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        counts = np.fromiter((len(c.sentences) for c in chunks), dtype=np.int64, count=len(chunks))
        self.first = np.zeros(len(chunks) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.first[1:])
        self.owner = np.repeat(np.arange(len(chunks), dtype=np.int32), counts)
        self.chunk_ids = [c.id for c in chunks]

    def __len__(self) -> int:
        return len(self.owner)

    def describe(self, rows: np.ndarray, similarities: np.ndarray) -> list[tuple[str, int, float]]:
        """``(chunk_id, position in the chunk, similarity)`` for each row, in the given order."""
        owners = self.owner[rows]
        positions = rows - self.first[owners]
        ids = self.chunk_ids
        return [
            (ids[o], p, s) for o, p, s in zip(owners.tolist(), positions.tolist(), similarities.tolist(), strict=True)
        ]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Vectors scaled to length 1 (zero vectors stay zero): the product is then cosine similarity,
    as in Chroma's cosine space, whatever ``Embeddings`` produced them."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)


def exact_scores(vectors: np.ndarray, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``vectors[rows] @ vector`` in float32, each score from its row's values alone (never from
    where the row sits, as a BLAS product's are): the products of two float32 numbers are exact in
    float64, and each row is summed the same way. Equal rows score equal, on every path. Rows are
    read a block at a time, so that scoring every row of a large matrix stays small in memory."""
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), _EXACT_ROWS):
        block = np.asarray(vectors[rows[start : start + _EXACT_ROWS]])
        out[start : start + len(block)] = np.multiply(block, vector, dtype=np.float64).sum(axis=1)
    return out


def candidates(approximate: np.ndarray, n: int, slack: float) -> np.ndarray:
    """Rows (ascending) whose approximate score is within ``2 * slack`` of the ``n``-th best: they
    hold the exact top ``n`` whenever every approximate score is within ``slack`` of the exact one."""
    count = len(approximate)
    if n >= count:
        return np.arange(count)
    nth = np.partition(approximate, count - n)[count - n]
    return np.flatnonzero(approximate >= nth - 2 * slack)


def top_rows(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` highest scores, best first; equal scores in row order."""
    n = min(n, len(scores))
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    if n < len(scores):
        # Not argpartition's n: among scores equal to the n-th it keeps any, and the cut must keep
        # the first rows of a tie, as the ranking does, whatever other rows are scored beside them.
        nth = np.partition(scores, len(scores) - n)[len(scores) - n]
        above = np.flatnonzero(scores > nth)
        rows = np.concatenate([above, np.flatnonzero(scores == nth)[: n - len(above)]])
    else:
        rows = np.arange(len(scores))
    return rows[np.lexsort((rows, -scores[rows]))]


class SentenceMatrix:
    """The sentence store of an exact index: every sentence vector in a (memory-mapped) matrix.

    Answers :meth:`query` like :class:`arag_graph.index.chroma.SentenceStore` does, exactly.
    """

    def __init__(
        self, vectors: np.ndarray, layout: SentenceLayout, config: dict[str, Any], root: Path | None = None
    ) -> None:
        self.vectors = vectors
        self.layout = layout
        self.config = config
        self.root = root

    @classmethod
    def open(
        cls, config: dict[str, Any], build_dir: Path, layout: SentenceLayout, dimension: int, root: Path
    ) -> SentenceMatrix:
        """Map the matrix a manifest names, checking that it is a plain file of this build whose
        header and size fit the chunks it is loaded with (a truncated or foreign file is damage)."""
        path = matrix_path(config, build_dir, root)
        try:
            vectors = load_index_array(root, path)
        except FileNotFoundError:
            raise IndexDamagedError(root, f"the sentence vectors {path} are missing") from None
        except (OSError, ValueError) as exc:
            detail = " ".join(str(exc).split())[:120]
            raise IndexDamagedError(root, f"the sentence vectors {path} cannot be read ({detail})") from None
        if not isinstance(vectors, np.ndarray) or vectors.dtype != np.float32 or vectors.ndim != 2:
            raise IndexDamagedError(root, f"{path} does not hold a float32 matrix of sentence vectors")
        if vectors.shape[0] != len(layout):
            raise IndexDamagedError(
                root, f"{path} holds {vectors.shape[0]} vectors, the chunks have {len(layout)} sentences"
            )
        if len(layout) and vectors.shape[1] != dimension:
            raise IndexDamagedError(
                root, f"{path} holds vectors of dimension {vectors.shape[1]}, the manifest records {dimension}"
            )
        return cls(vectors, layout, config, root)

    def query(self, vector: Sequence[float] | np.ndarray, n: int) -> list[tuple[str, int, float]]:
        """The ``n`` nearest sentences as ``(chunk_id, position, cosine similarity)``, best first
        (equal scores in row order); the scores are :func:`exact_scores`."""
        if not len(self.layout):
            return []
        query = unit_rows(np.asarray(vector, dtype=np.float32))
        rows = candidates(self.vectors @ query, max(1, n), FP32_SLACK)
        return self._ranked(rows, query, max(1, n))

    def _ranked(self, rows: np.ndarray, query: np.ndarray, n: int) -> list[tuple[str, int, float]]:
        """The best ``n`` of candidate ``rows`` (ascending) by exact score, described."""
        scores = exact_scores(self.vectors, rows, query)
        best = top_rows(scores, n)
        return self.layout.describe(rows[best], scores[best])

    def count(self) -> int:
        return len(self.layout)

    def all_vectors(self) -> tuple[np.ndarray, list[tuple[str, int]]]:
        """Every stored vector with its ``(chunk_id, position)``, for exact comparisons in tests and
        benchmarks."""
        rows = np.arange(len(self.layout))
        described = self.layout.describe(rows, np.zeros(len(rows), dtype=np.float32))
        return np.asarray(self.vectors), [(c, p) for c, p, _ in described]

    def check(self) -> int:
        """Read every row and check what the build wrote: finite unit vectors (or zero ones, for
        sentences the encoder gave none). For ``arag verify``; returns the number of rows."""
        for start in range(0, len(self.layout), _CHECK_ROWS):
            block = np.asarray(self.vectors[start : start + _CHECK_ROWS], dtype=np.float64)
            norms = np.linalg.norm(block, axis=1)
            bad = ~(np.isfinite(norms) & ((np.abs(norms - 1.0) < 1e-3) | (norms == 0.0)))
            if bad.any():
                row = start + int(np.argmax(bad))
                raise IndexDamagedError(
                    self.root or Path("DIR"), f"sentence vector {row} is not what the build wrote (not a unit vector)"
                )
        return len(self.layout)

    def drop(self) -> None:
        """Nothing to do: the matrix lives in the build directory and goes with it."""


class MatrixWriter:
    """Writes a ``rows x dim`` float32 ``.npy`` block by block, holding one block at a time.

    The header needs the dimension, which the first block gives. :meth:`close` checks that exactly
    ``rows`` rows arrived, so a short write can never pass for a complete matrix.
    """

    def __init__(self, path: Path, rows: int) -> None:
        self.path = path
        self.rows = rows
        self.written = 0
        self.dim: int | None = None
        self._fh: Any = None

    def add(self, vectors: np.ndarray, *, unit: bool = False) -> None:
        """Append a block of vectors, scaled to length 1 unless ``unit`` says they are already (an
        update's reused rows: scaling them again could move their last bit, and with it a tie)."""
        block = np.ascontiguousarray(vectors, dtype="<f4")
        block = block if unit else unit_rows(block)
        if block.ndim != 2 or (self.dim is not None and block.shape[1] != self.dim):
            raise ValueError(f"sentence vectors of shape {block.shape} do not continue the matrix")
        if self._fh is None:
            self.dim = int(block.shape[1])
            self._open()
        if self.written + len(block) > self.rows:
            raise ValueError("more sentence vectors than sentences")
        self._fh.write(block.tobytes())
        self.written += len(block)

    def _open(self) -> None:
        self._fh = self.path.open("wb")
        header = {"descr": "<f4", "fortran_order": False, "shape": (self.rows, self.dim)}
        np.lib.format.write_array_header_1_0(self._fh, header)

    def close(self) -> None:
        if self._fh is None:  # no sentences at all (or no block yet): an empty, valid matrix
            self.dim = self.dim or 0
            self._open()
        if self.written != self.rows:
            self._fh.close()
            raise ValueError(f"{self.written} sentence vectors written for {self.rows} sentences")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()


class DeviceMatrix(SentenceMatrix):
    """A sentence matrix searched on a GPU (any torch device): the same answers as on the CPU.

    The vectors are copied to the device once, at the first search, in float16 on a GPU (half the
    memory and half the bytes each search reads: a million 384-d sentences are 0.77 GB, which an
    H200 reads in well under a millisecond), along with each row's chunk. The device computes every
    row's score and keeps each chunk's best (a segment maximum: ``scatter_reduce``); only the rows
    that could rank come back, and they are ranked by the exact scores of the CPU path, read from
    the memory-mapped file (see the module's docstring). ``dtype`` float32 (the default off a GPU)
    runs the same code at float32's margin, which is how the CPU tests it.
    """

    def __init__(self, matrix: SentenceMatrix, device: str, dtype: str | None = None) -> None:
        super().__init__(matrix.vectors, matrix.layout, matrix.config, matrix.root)
        self.device = device
        self.dtype = dtype or ("float32" if device == "cpu" else "float16")
        self.slack = FP32_SLACK if self.dtype == "float32" else FP16_SLACK
        self._tensors: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def tensors(self) -> tuple[Any, Any]:
        """The matrix and each row's chunk position (int64) on the device, copied at first use."""
        if self._tensors is None:
            with self._lock:
                if self._tensors is None:
                    import torch

                    rows, width = self.vectors.shape
                    matrix = torch.empty((rows, width), dtype=getattr(torch, self.dtype), device=self.device)
                    for start in range(0, rows, _DEVICE_ROWS):
                        block = np.array(self.vectors[start : start + _DEVICE_ROWS], dtype=np.float32)
                        matrix[start : start + len(block)] = torch.from_numpy(block).to(self.device)
                    owner = torch.from_numpy(self.layout.owner.astype(np.int64)).to(self.device)
                    self._tensors = (matrix, owner)
        return self._tensors

    def _scores(self, query: np.ndarray) -> Any:
        """Every row's approximate score, float32, on the device."""
        import torch

        matrix, _ = self.tensors()
        vector = torch.from_numpy(query).to(device=self.device, dtype=matrix.dtype)
        return (matrix @ vector).float()

    def query(self, vector: Sequence[float] | np.ndarray, n: int) -> list[tuple[str, int, float]]:
        if not len(self.layout):
            return []
        import torch

        query = unit_rows(np.asarray(vector, dtype=np.float32))
        scores = self._scores(query)
        n = max(1, min(n, len(self.layout)))
        nth = torch.topk(scores, n, sorted=False).values.min()
        rows = torch.nonzero(scores >= nth - 2 * self.slack).squeeze(1).cpu().numpy()
        return self._ranked(rows, query, n)

    def covering(self, vector: Sequence[float] | np.ndarray, chunks: int, n: int) -> list[tuple[str, int, float]]:
        """The best sentences, best first, as many as hold the best sentence of each of the ``chunks``
        best chunks (by their best sentence) and at least ``n`` sentences: a prefix of the exact
        ranking that :meth:`query` with a large enough ``n`` would give, found in one pass.

        The device keeps each chunk's best approximate score (a segment maximum over the rows'
        chunks); rows within the margin of the ``chunks``-th best chunk or the ``n``-th best row come
        back, their exact scores decide, and every row scoring at least the lower of the exact
        ``chunks``-th chunk and ``n``-th row is returned (no row of the full ranking above it can be
        missing: its approximate score was within the margin).
        """
        total = len(self.layout)
        if not total:
            return []
        import torch

        query = unit_rows(np.asarray(vector, dtype=np.float32))
        scores = self._scores(query)
        _, owner = self.tensors()
        count = len(self.layout.chunk_ids)
        chunks, n = max(1, min(chunks, count)), max(1, min(n, total))
        best = torch.full((count,), float("-inf"), device=scores.device).scatter_reduce(
            0, owner, scores, reduce="amax", include_self=True
        )
        bound = torch.minimum(torch.topk(best, chunks, sorted=False).values.min(), torch.topk(scores, n).values.min())
        rows = torch.nonzero(scores >= bound - 2 * self.slack).squeeze(1).cpu().numpy()
        exact = exact_scores(self.vectors, rows, query)
        owners = self.layout.owner[rows]
        found, where = np.unique(owners, return_inverse=True)
        chunk_best = np.full(len(found), -np.inf, dtype=np.float32)
        np.maximum.at(chunk_best, where, exact)
        floor = min(
            np.partition(chunk_best, len(found) - chunks)[len(found) - chunks] if len(found) >= chunks else -np.inf,
            np.partition(exact, len(exact) - n)[len(exact) - n] if len(exact) >= n else -np.inf,
        )
        keep = np.flatnonzero(exact >= floor)
        order = keep[np.lexsort((keep, -exact[keep]))]
        return self.layout.describe(rows[order], exact[order])
