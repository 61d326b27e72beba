"""Model specs and what loading models does to the host process.

- ``provider:name`` goes to LangChain's ``init_chat_model`` for that provider (never silently to
  ``ChatOpenAI``); a provider whose package is missing fails in one line naming the package;
  a prefix no provider claims stays part of an OpenAI-compatible model name (Ollama's ``llama3:8b``);
- request limits come from the arguments, the environment or the defaults, and bad values fail;
- loading the packaged encoder leaves ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` alone, so a host
  app can still download its own models afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from arag_graph.core.errors import ModelSpecError
from arag_graph.llm import models
from arag_graph.llm.models import request_limits, resolve_chat_model
from arag_graph.llm.openai_chat import CompleteReplyChatOpenAI

REPO = Path(__file__).resolve().parents[1]


def test_a_provider_spec_goes_to_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_init(name: str, **kwargs: Any) -> Any:
        seen.update(name=name, **kwargs)
        return FakeListChatModel(responses=["ok"])

    monkeypatch.setattr("langchain.chat_models.init_chat_model", fake_init)
    model = resolve_chat_model("anthropic:claude-sonnet-4-5", base_url="http://localhost:1/v1", max_tokens=99)
    assert isinstance(model, FakeListChatModel)
    assert (seen["name"], seen["model_provider"], seen["max_tokens"]) == ("claude-sonnet-4-5", "anthropic", 99)
    assert "base_url" not in seen  # an OpenAI-compatible endpoint is never handed to another provider
    assert seen["timeout"] > 0 and seen["max_retries"] >= 0


def test_a_provider_without_its_package_fails_in_one_line() -> None:
    with pytest.raises(ModelSpecError) as err:
        resolve_chat_model("anthropic:claude-sonnet-4-5")
    assert "langchain-anthropic" in str(err.value) and "pip install" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_prefix_no_provider_claims_is_part_of_an_openai_compatible_name() -> None:
    model = resolve_chat_model("llama3:8b", base_url="http://localhost:11434/v1")
    assert isinstance(model, CompleteReplyChatOpenAI) and model.model_name == "llama3:8b"
    assert isinstance(resolve_chat_model("openai:gpt-4o-mini", api_key="sk-x"), CompleteReplyChatOpenAI)


def test_request_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARAG_MODEL_TIMEOUT", raising=False)
    monkeypatch.delenv("ARAG_MODEL_RETRIES", raising=False)
    assert request_limits() == (models.DEFAULT_TIMEOUT, models.DEFAULT_RETRIES)
    assert request_limits(5, 0) == (5.0, 0)
    monkeypatch.setenv("ARAG_MODEL_TIMEOUT", "12.5")
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "1")
    assert request_limits() == (12.5, 1)
    for bad in ("nan", "inf", "-3", "soon"):
        monkeypatch.setenv("ARAG_MODEL_TIMEOUT", bad)
        with pytest.raises(ModelSpecError, match="ARAG_MODEL_TIMEOUT"):
            request_limits()


def test_loading_the_encoder_leaves_the_hosts_hub_settings_alone() -> None:
    """In a fresh process with the hub switches unset: load the packaged encoder, embed, look again."""
    script = (
        "import json, os\n"
        "from arag_graph.index.encoders import default_embeddings\n"
        "vector = default_embeddings().embed_query('hello')\n"
        "print(json.dumps({'dim': len(vector), 'env': {k: os.environ.get(k) for k in "
        "('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE')}}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # were the hub asked anything, it would fail here, offline
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["dim"] == 384
    assert out["env"] == {"HF_HUB_OFFLINE": None, "TRANSFORMERS_OFFLINE": None}
