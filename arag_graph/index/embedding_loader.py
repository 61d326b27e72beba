"""Any embedding model by a spec string: what ``arag index --embedding`` takes and a manifest records.

A spec is one of

- empty: the packaged all-MiniLM-L6-v2 (:func:`arag_graph.index.encoders.default_embeddings`);
- a local directory of a sentence-transformers model (recorded as its absolute path);
- a sentence-transformers model name (``BAAI/bge-small-en-v1.5``) already in the Hugging Face cache;
- ``openai:NAME``: an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI itself, or a local server
  with ``base_url``; vLLM, Ollama, llama.cpp, LM Studio, TEI all speak it).

Nothing is downloaded, ever: a model name that is not in the local cache fails in one line that says
so (``local_files_only`` underneath), before any corpus is read. Keys come from the environment only
(``ARAG_API_KEY`` / ``OPENAI_API_KEY``, as for chat models) and are never written to an index; the
manifest keeps the spec and the endpoint's base URL (a base URL carrying credentials is refused), which
a served run checks against the operator's allowed endpoints, on the built client
(:func:`arag_graph.core.endpoints.check_endpoint`, decided by :mod:`arag_graph.run.policy`), before any
request carries the key there.

Every endpoint request is bounded like a chat request (:mod:`arag_graph.llm.models`): ``timeout`` seconds
in total per attempt, every read of the reply included (:mod:`arag_graph.core.deadlines`), and
``max_retries`` retries, from the arguments, else ``$ARAG_EMBEDDING_TIMEOUT`` /
``$ARAG_EMBEDDING_RETRIES``, else 30 s and 2. Within one operation (a search tool's call, a
retrieval: :func:`arag_graph.core.deadlines.one_operation`) all the endpoint's requests share that
bound, ``timeout × attempts`` from the first of them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from arag_graph.core.endpoints import check_endpoint, client_endpoint
from arag_graph.core.errors import AragError, ModelSpecError
from arag_graph.core.safety import url_credentials, url_without_credentials
from arag_graph.index.embedding_spec import ENDPOINT_PREFIX, is_endpoint_spec, model_folder
from arag_graph.index.encoders import (
    DEFAULT_ENCODER,
    DEFAULT_MODEL_ID,
    Encoder,
    OnnxSentenceEncoder,
    SentenceEncoder,
    default_embeddings,
    encoder_and_device,
)

LOCAL_ENCODER: Encoder = "torch"
"""The default backend of a model other than the packaged one: exporting an arbitrary architecture
to ONNX is not guaranteed to work, torch runs them all (``--encoder onnx`` may still be asked for)."""


def embedding_limits(timeout: float | None = None, max_retries: int | None = None) -> tuple[float, int]:
    """Seconds per attempt and retries of an embeddings request: given, else the environment, else defaults."""
    # Imported here: the chat-model module reaches the index (through the offline policy), which imports this one.
    from arag_graph.core.limits import DEFAULT_RETRIES, DEFAULT_TIMEOUT, RETRIES_RANGE, TIMEOUT_RANGE, number_from_env

    if not timeout or timeout <= 0:
        timeout = number_from_env("ARAG_EMBEDDING_TIMEOUT", DEFAULT_TIMEOUT, *TIMEOUT_RANGE)
    if max_retries is None or max_retries < 0:
        max_retries = int(number_from_env("ARAG_EMBEDDING_RETRIES", DEFAULT_RETRIES, *RETRIES_RANGE))
    return float(timeout), int(max_retries)


def resolve_embeddings(
    spec: str | Embeddings | None,
    *,
    base_url: str | None = None,
    encoder: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    device: str | None = "cpu",
) -> Embeddings:
    """The ``Embeddings`` a spec names (instances pass through), or a one-line :class:`ModelSpecError`.

    ``device`` is where a local model runs (:func:`arag_graph.index.encoders.encoder_and_device`);
    an endpoint or a given instance runs where it runs."""
    if isinstance(spec, Embeddings):
        if encoder is not None:
            raise AragError("give either embeddings= or encoder=, not both: encoder picks the default model's backend")
        return spec
    text = (spec or "").strip()
    if base_url and not is_endpoint_spec(text):
        raise ModelSpecError(
            f"--embedding-base-url is for an OpenAI-compatible endpoint; give --embedding openai:MODEL with it "
            f"(got {text or 'the default model'!r})"
        )
    if not text or text == DEFAULT_MODEL_ID:
        return default_embeddings(*encoder_and_device(encoder, device, DEFAULT_ENCODER))
    if is_endpoint_spec(text):
        if encoder is not None:
            raise ModelSpecError(f"--encoder runs a local model; {text!r} is embedded by its endpoint, drop --encoder")
        return EndpointEmbeddings(
            text[len(ENDPOINT_PREFIX) :].strip(), base_url, *embedding_limits(timeout, max_retries)
        )
    path, model_id = local_model(text)
    backend, where = encoder_and_device(encoder, device, LOCAL_ENCODER)
    if backend == "torch":
        return SentenceEncoder(path, model_id=model_id, device=where)
    return OnnxSentenceEncoder(path, model_id=model_id, quantized=backend == "onnx-int8")


def local_model(spec: str) -> tuple[str, str]:
    """``(directory, model id)`` of a local sentence-transformers model: a directory as its absolute
    path, a model name from the Hugging Face cache (``local_files_only``: never the network)."""
    folder = model_folder(spec)
    if folder is not None:
        return str(folder), str(folder)
    candidate = Path(spec).expanduser()
    if candidate.is_absolute() or spec.startswith((".", "~")) or spec.count("/") > 1:
        raise ModelSpecError(
            f"embedding model {spec!r}: no such directory; give the folder of a sentence-transformers model"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE

    try:
        folder = snapshot_download(spec, local_files_only=True)
    except Exception:  # not cached, or not a valid repository name: both mean "not on this machine"
        raise ModelSpecError(
            f"embedding model {spec!r} is not on this machine (not a directory, not in the Hugging Face cache "
            f"{HF_HUB_CACHE}) and nothing is downloaded at run time; fetch it once with "
            f"`huggingface-cli download {spec}` or give its local directory"
        ) from None
    return folder, spec


def _endpoint_host(base_url: str | None) -> str:
    return base_url or os.environ.get("OPENAI_BASE_URL") or "the OpenAI API"


class EndpointEmbeddings(Embeddings):
    """An OpenAI-compatible ``/v1/embeddings`` model, L2-normalised, failing in one line.

    Wraps ``langchain_openai.OpenAIEmbeddings`` with its token-length check off (that check tokenises
    with tiktoken for OpenAI's own models and sends token ids, which local servers do not take).
    Vectors are normalised here because the index ranks by dot product and not every server
    normalises. Errors of the endpoint (after the client's own retries) become :class:`AragError`.
    """

    def __init__(self, name: str, base_url: str | None, timeout: float, max_retries: int) -> None:
        if not name:
            raise ModelSpecError("--embedding openai: needs a model name, e.g. openai:text-embedding-3-small")
        if base_url and url_credentials(base_url):
            # The base URL is recorded in the index's manifest (and eval's cached indexes): no secret in it.
            raise ModelSpecError(
                f"--embedding-base-url {url_without_credentials(base_url)[:100]!r} carries credentials, which would "
                "be written into the index; give the URL without them and the key in ARAG_API_KEY or OPENAI_API_KEY"
            )
        if base_url and "#" in base_url:
            # A fragment never reaches a server, so it can only be a mistake or something private (a
            # token pasted after '#'); either way it does not belong in the manifest. Not echoed.
            raise ModelSpecError(
                f"--embedding-base-url {url_without_credentials(base_url.split('#', 1)[0])[:100]!r}#... has a "
                "fragment, which no server receives and which would be written into the index; give the URL "
                "without the '#' and what follows"
            )
        from arag_graph.core.limits import api_key_from_env

        key = api_key_from_env()
        if key is None:
            if base_url is None and not os.environ.get("OPENAI_BASE_URL"):
                raise ModelSpecError(
                    f"embedding model openai:{name} needs an API key: set OPENAI_API_KEY (never on the command "
                    "line), or give --embedding-base-url of a local OpenAI-compatible server"
                )
            key = "not-needed"  # local servers accept any key
        from langchain_openai import OpenAIEmbeddings

        from arag_graph.core.deadlines import openai_http_clients

        self.name = name
        self.model_id = f"{ENDPOINT_PREFIX}{name}"
        self.base_url = base_url
        self.timeout, self.max_retries = timeout, max_retries
        kwargs: dict[str, Any] = {
            "model": name,
            "api_key": key,
            "timeout": timeout,
            "max_retries": max_retries,
            "check_embedding_ctx_length": False,
            **openai_http_clients(),  # the timeout is total per attempt, not per read
        }
        if base_url:
            kwargs["base_url"] = base_url
        self._client = OpenAIEmbeddings(**kwargs)
        check_endpoint("embeddings", client_endpoint(self._client), f"embedding model {self.model_id}")

    def _timed_out(self, why: str) -> AragError:
        return AragError(
            f"embedding endpoint {_endpoint_host(self.base_url)} ({self.model_id}) timed out ({why}): no "
            f"complete reply within {self.timeout:g} s per attempt, {self.max_retries + 1} attempt(s); check the "
            "server, or allow more time with $ARAG_EMBEDDING_TIMEOUT"
        )

    def _call(self, texts: list[str]) -> list[list[float]]:
        from arag_graph.core.deadlines import endpoint_deadline

        # In one operation (a search, a retrieval) every request here shares the bound users set,
        # timeout × attempts from the first: a fallback that asks again does not start it afresh.
        with endpoint_deadline(self, self.timeout * (self.max_retries + 1)) as deadline:
            if deadline is not None and time.monotonic() >= deadline:
                raise self._timed_out("this operation's time for the endpoint is spent") from None
            return self._embedded(texts)

    def _embedded(self, texts: list[str]) -> list[list[float]]:
        try:
            vectors = self._vectors(self._client.embed_documents(texts))
        except AragError:
            raise
        except Exception as exc:  # openai/httpx errors after retries, malformed replies
            from arag_graph.core.safety import _timed_out  # the rule model errors use

            detail = " ".join(str(exc).split())[:200]
            if _timed_out(exc):
                raise self._timed_out(type(exc).__name__) from None
            raise AragError(
                f"embedding endpoint {_endpoint_host(self.base_url)} ({self.model_id}) failed: "
                f"{type(exc).__name__}: {detail}; check that the server runs and serves this model"
            ) from None
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise AragError(
                f"embedding endpoint {_endpoint_host(self.base_url)} answered {len(vectors)} vectors for "
                f"{len(texts)} texts; check the server"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.maximum(norms, 1e-12)).tolist()

    def _vectors(self, answered: Any) -> np.ndarray:
        """The endpoint's answer as a float32 matrix, or the one line naming what is wrong with it:
        vectors of different lengths gave NumPy's "inhomogeneous shape" text (issue 38)."""
        try:
            return np.asarray(answered, dtype=np.float32)
        except (ValueError, TypeError):
            pass
        lengths = sorted({len(v) for v in answered if hasattr(v, "__len__")}) if isinstance(answered, list) else []
        what = (
            f"vectors of different lengths ({', '.join(map(str, lengths[:5]))}{', ...' if len(lengths) > 5 else ''})"
            if len(lengths) > 1
            else "something that is not a list of vectors of numbers"
        )
        raise AragError(
            f"embedding endpoint {_endpoint_host(self.base_url)} ({self.model_id}) answered {what}; every vector "
            "must have the model's one dimension: check the server and the model it serves"
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._call(list(texts)) if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self._call([text])[0]


def endpoint_base_url(embeddings: Embeddings) -> str | None:
    """The base URL an index built with ``embeddings`` must record (None: a local model or the default)."""
    return embeddings.base_url if isinstance(embeddings, EndpointEmbeddings) else None
