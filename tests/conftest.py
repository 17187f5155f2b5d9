"""Shared fixtures: a live chat history service over real HTTP (one per test), the offline LLM, TLS files."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore
from chatlab.tutorial.llm import LLMConnection, connect_llm


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio, the framework's and the notebooks' loop."""
    return "asyncio"


@pytest.fixture
async def llm(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LLMConnection]:
    """The offline tutorial model, whatever LLM this machine has (also under ``--real-llm``)."""
    monkeypatch.setenv("CHATLAB_LLM", "offline")
    connection = await connect_llm(announce=False)
    yield connection
    await connection.aclose()


@pytest.fixture
def settings() -> ServiceSettings:
    return ServiceSettings()


@pytest.fixture
def service(settings: ServiceSettings) -> Iterator[BackgroundServer]:
    """A fresh service with an empty in-memory store, on a free loopback port."""
    with BackgroundServer(create_app(InMemoryChatHistoryStore(), settings), name="test-service") as server:
        yield server


@pytest.fixture
def http(service: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=30) as client:
        yield client


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 and localhost, as PEM files."""
    import trustme

    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    paths = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.private_key_pem.write_to_path(str(paths["key"]))
    paths["cert"].write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    return paths
