"""CHATLAB_LLM modes: which LLM is used, and that it is always said. No real LLM is needed or touched."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from agent_framework.openai import OpenAIChatCompletionClient

from chatlab.client.errors import LLMUnavailableError
from chatlab.runner import BackgroundServer
from chatlab.tutorial.llm import DEFAULT_API_KEY, DEFAULT_BASE_URL, DEFAULT_MODEL, connect_llm, llm_mode
from chatlab.tutorial.offline_model import OFFLINE_MODEL_ID, create_offline_app

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHATLAB_LLM", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_CHAT_COMPLETION_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """Some OpenAI-compatible endpoint that answers (the offline app, standing in for LM Studio)."""
    with BackgroundServer(create_offline_app(), name="test-endpoint") as server:
        yield f"{server.url}/v1"


def test_the_articles_defaults() -> None:
    assert (DEFAULT_BASE_URL, DEFAULT_MODEL, DEFAULT_API_KEY) == (
        "http://localhost:1234/v1",
        "openai/gpt-oss-20b",
        "sk-dummy",
    )


def test_mode_comes_from_chatlab_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    assert llm_mode() == "auto"
    monkeypatch.setenv("CHATLAB_LLM", " Offline ")
    assert llm_mode() == "offline"
    assert llm_mode("endpoint") == "endpoint"
    monkeypatch.setenv("CHATLAB_LLM", "lmstudio")
    with pytest.raises(ValueError, match="auto, offline, endpoint"):
        llm_mode()


async def test_offline_mode_uses_the_offline_model_and_says_so(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATLAB_LLM", "offline")
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint)  # an answering endpoint is ignored in offline mode
    llm = await connect_llm()
    try:
        assert llm.kind == "offline" and llm.model == OFFLINE_MODEL_ID and llm.base_url != endpoint
        assert isinstance(llm.client, OpenAIChatCompletionClient)
        assert "offline tutorial model" in capsys.readouterr().out
    finally:
        await llm.aclose()


async def test_auto_uses_a_configured_endpoint_that_answers(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint)
    monkeypatch.setenv("OPENAI_CHAT_COMPLETION_MODEL", "qwen3-8b")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    llm = await connect_llm()
    try:
        assert (llm.kind, llm.base_url, llm.model) == ("endpoint", endpoint, "qwen3-8b")
        assert isinstance(llm.client, OpenAIChatCompletionClient) and llm.client.model == "qwen3-8b"
        assert str(llm.client.client.base_url).rstrip("/") == endpoint and llm.client.client.api_key == "sk-local"
        out = capsys.readouterr().out
        assert f"qwen3-8b at {endpoint}" in out and "CHATLAB_LLM=auto" in out
    finally:
        await llm.aclose()


async def test_auto_falls_back_to_the_offline_model_and_says_why(
    monkeypatch: pytest.MonkeyPatch, dead_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", dead_url)
    llm = await connect_llm()
    try:
        assert llm.kind == "offline"
        out = capsys.readouterr().out
        assert "offline tutorial model" in out and f"no LLM answered at {dead_url}/models" in out
    finally:
        await llm.aclose()


async def test_endpoint_mode_never_falls_back(monkeypatch: pytest.MonkeyPatch, dead_url: str) -> None:
    monkeypatch.setenv("CHATLAB_LLM", "endpoint")
    with pytest.raises(LLMUnavailableError, match="CHATLAB_LLM=offline") as caught:
        await connect_llm(base_url=dead_url)
    assert dead_url in str(caught.value)


async def test_arguments_override_the_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "from-env")
    llm = await connect_llm("endpoint", base_url=endpoint, model="from-arg", announce=False)
    try:
        assert (llm.kind, llm.model) == ("endpoint", "from-arg")
    finally:
        await llm.aclose()
