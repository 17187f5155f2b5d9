"""Shared fixtures: a live chat history service over real HTTP, one per test."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore


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
    with httpx.Client(base_url=service.url, timeout=10) as client:
        yield client
