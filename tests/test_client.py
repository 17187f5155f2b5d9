"""The typed clients against a real service: every operation, sync and async, errors, retries, TLS and keys.

Each test runs with both clients: the async one is driven through one event loop
(:class:`asyncio.Runner`) by :class:`Blocking`, so one test body checks both.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatlab.client import (
    AsyncChatHistoryClient,
    ChatHistoryClient,
    ChatHistoryCodecError,
    ChatHistoryServiceConflict,
    ChatHistoryServiceProtocolError,
    ChatHistoryServiceStatusError,
    ChatHistoryServiceUnavailable,
    RetryPolicy,
    encode_messages,
    service_url,
)
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore
from chatlab.vocabulary import ConversationSummary, Version
from tests.faults import DroppingProxy, FlakyGateway

KEY = "client-0123456789abcdef-key"
FAST = RetryPolicy(attempts=4, backoff=0.01, max_backoff=0.05)


def text(value: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "contents": [{"$type": "text", "text": value}]}


class Blocking:
    """An :class:`AsyncChatHistoryClient` with blocking methods, all run on one event loop."""

    def __init__(self, client: AsyncChatHistoryClient, runner: asyncio.Runner) -> None:
        self.client = client
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        return lambda *args, **kwargs: self._runner.run(method(*args, **kwargs))

    def close(self) -> None:
        self._runner.run(self.client.aclose())


Make = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    """Makes a client of the parameter's kind from the clients' arguments; closes them after the test."""
    made: list[Any] = []
    with asyncio.Runner() as runner:

        def make(*args: Any, **kwargs: Any) -> Any:
            if request.param == "sync":
                client: Any = ChatHistoryClient(*args, **kwargs)
            else:
                client = Blocking(AsyncChatHistoryClient(*args, **kwargs), runner)
            made.append(client)
            return client

        yield make
        for client in made:
            client.close()


def test_every_operation(service: BackgroundServer, make: Make) -> None:
    client = make(service.url, retry=FAST)
    assert client.summaries() == []
    assert client.head("conv") == Version(None, 0)
    first = client.append("conv", [text("one"), text("two", "assistant")])
    assert first is not None and first.count == 2 and first.generation

    page = client.read("conv")
    assert page.messages == [text("one"), text("two", "assistant")] and page.version == first and page.count == 2
    assert page.next_after is None and page.body == encode_messages(page.messages)

    after = client.append("conv", [text("three")])
    assert after == Version(first.generation, 3)  # an append keeps the generation
    assert client.head("conv") == after
    part = client.read_after("conv", 1, limit=1)
    assert (part.messages, part.count, part.next_after, part.version) == ([text("two", "assistant")], 3, 2, after)
    end = client.read_after("conv", 2, limit=5)
    assert (end.messages, end.next_after) == ([text("three")], None)
    assert client.read_after("conv", 3).messages == []

    replaced = client.replace("conv", [text("only")])
    assert replaced is not None and replaced.count == 1 and replaced.generation != first.generation
    (summary,) = client.summaries()
    assert summary == ConversationSummary("conv", 1)  # and when it began and was last written, as the service says
    assert summary.created_at is not None and summary.updated_at is not None
    assert summary.created_at <= summary.updated_at
    client.delete("conv")
    assert client.head("conv") == Version(None, 0) and client.read("conv").messages == []
    with pytest.raises(ValueError, match="after must be a whole number"):
        client.read_after("conv", -1)


def test_if_match_refuses_a_stale_version_with_the_current_one(service: BackgroundServer, make: Make) -> None:
    client = make(service.url)
    seen = client.append("conv", [text("a")])
    now = client.append("conv", [text("b")])  # another writer, say
    for write in (
        lambda: client.append("conv", [text("lost")], if_match=seen),
        lambda: client.replace("conv", [text("lost")], if_match=seen),
        lambda: client.delete("conv", if_match=seen),
    ):
        with pytest.raises(ChatHistoryServiceConflict) as caught:
            write()
        assert caught.value.status == 412 and caught.value.current == now
        assert "nothing was written" in str(caught.value) and "Read the conversation again" in str(caught.value)
    assert [m["contents"][0]["text"] for m in client.read("conv").messages] == ["a", "b"]
    assert client.append("conv", [text("c")], if_match=now) == Version(now.generation, 3)
    with pytest.raises(ChatHistoryServiceConflict):
        client.delete("absent", if_match="*")  # "*": only if it exists
    client.delete("conv", if_match=client.head("conv"))
    assert client.summaries() == []


def test_an_idempotency_key_stores_an_append_once(service: BackgroundServer, make: Make) -> None:
    client = make(service.url)
    first = client.append("conv", [text("once")], idempotency_key="retry-me")
    assert client.append("conv", [text("once")], idempotency_key="retry-me") == first
    assert client.head("conv").count == 1
    with pytest.raises(ChatHistoryServiceStatusError) as caught:
        client.append("conv", [text("other")], idempotency_key="retry-me")
    assert caught.value.status == 422 and client.head("conv").count == 1


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_no_service_is_a_clear_error(make: Make) -> None:
    url = _dead_url()
    with pytest.raises(ChatHistoryServiceUnavailable) as caught:
        make(url, retry=None).summaries()
    message = str(caught.value)
    assert f"{url}/chat-history" in message and "python -m chatlab serve --port 5000" in message
    assert "CHAT_HISTORY_SERVICE_URL" in message and caught.value.status is None
    assert "run that step again" in message  # a notebook's own service comes back from its start cell


def test_refusals_carry_the_services_problem_and_what_to_do(make: Make) -> None:
    with BackgroundServer(create_app(InMemoryChatHistoryStore(), ServiceSettings(max_messages=1))) as server:
        client = make(server.url, retry=FAST)
        with pytest.raises(ChatHistoryServiceStatusError) as caught:
            client.append("conv", [text("a"), text("b")])
        assert caught.value.status == 413 and "limit is 1" in caught.value.detail and "HTTP 413" in str(caught.value)
        with pytest.raises(ChatHistoryServiceStatusError) as caught:
            make(f"{server.url}/nope").summaries()
        assert caught.value.status == 404 and "CHAT_HISTORY_SERVICE_URL" in str(caught.value)
        assert client.summaries() == []


async def _not_a_service(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"<html>hello</html>"})


def test_something_else_answering_is_named(make: Make) -> None:
    with BackgroundServer(_not_a_service, name="not-a-service") as server:
        client = make(server.url)
        for call in (lambda: client.read("conv"), client.summaries, lambda: client.head("conv")):
            with pytest.raises(ChatHistoryServiceProtocolError, match="did not answer like a chat history service"):
                call()


def test_values_json_cannot_hold_are_refused_before_sending(service: BackgroundServer, make: Make) -> None:
    client = make(service.url)
    with pytest.raises(ChatHistoryCodecError, match="nothing was sent"):
        client.append("conv", [{"role": "user", "contents": [{"$type": "text", "text": float("nan")}]}])
    assert client.summaries() == []


@pytest.mark.parametrize("status", [503, 429])
def test_transient_statuses_are_retried(make: Make, status: int) -> None:
    store = InMemoryChatHistoryStore()
    gateway = FlakyGateway(create_app(store), [status, status])
    with BackgroundServer(gateway, name="flaky") as server:
        client = make(server.url, retry=FAST)
        client.append("conv", [text("once")])
        assert client.head("conv").count == 1 and gateway.seen == 2


def test_a_lost_append_answer_is_retried_with_the_same_key_and_stored_once(make: Make) -> None:
    with BackgroundServer(create_app(InMemoryChatHistoryStore()), name="behind-proxy") as server:
        proxy = DroppingProxy(server.port)
        try:
            client = make(proxy.url, retry=FAST)
            version = client.append("conv", [text("one"), text("two")])
            assert proxy.dropped == 1 and version is not None and version.count == 2
            assert client.head("conv").count == 2
        finally:
            proxy.close()


@pytest.fixture(scope="module")
def tls_service(pki: dict[str, Path]) -> Iterator[BackgroundServer]:
    app = create_app(InMemoryChatHistoryStore(), ServiceSettings(api_keys={KEY: "agents"}))
    with BackgroundServer(app, name="client-tls", ssl_certfile=pki["cert"], ssl_keyfile=pki["key"]) as server:
        yield server


def test_tls_and_the_api_key(
    tls_service: BackgroundServer, pki: dict[str, Path], make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAT_HISTORY_SERVICE_API_KEY", raising=False)
    client = make(tls_service.url, api_key=KEY, verify=pki["ca"])
    key = uuid.uuid4().hex  # the service is the module's: a key of this test's own
    client.append(key, [text("over TLS")])
    assert ConversationSummary(key, 1) in client.summaries()

    with pytest.raises(ChatHistoryServiceStatusError) as caught:
        make(tls_service.url, verify=pki["ca"]).summaries()
    assert caught.value.status == 401 and "CHAT_HISTORY_SERVICE_API_KEY" in str(caught.value)
    monkeypatch.setenv("CHAT_HISTORY_SERVICE_API_KEY", KEY)
    assert make(tls_service.url, verify=pki["ca"]).head(key).count == 1
    assert KEY not in repr(client)

    with pytest.raises(ChatHistoryServiceUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        make(tls_service.url, retry=FAST).summaries()  # default CAs: refused, and not retried


def test_the_url_comes_from_the_argument_the_environment_or_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAT_HISTORY_SERVICE_URL", raising=False)
    assert service_url() == "http://localhost:5000" == ChatHistoryClient().url
    monkeypatch.setenv("CHAT_HISTORY_SERVICE_URL", "http://history.example:8080/")
    assert service_url() == "http://history.example:8080" == AsyncChatHistoryClient().url
    assert service_url("http://elsewhere:1/") == "http://elsewhere:1"


def test_a_caller_owned_http_client_is_used_and_left_open(service: BackgroundServer) -> None:
    with httpx.Client(base_url=service.url, timeout=10) as http:
        with ChatHistoryClient(http_client=http) as client:
            assert client.url == service.url
            client.append("conv", [text("x")])
        assert not http.is_closed and http.get("/chat-history").json()[0]["messageCount"] == 1
        with pytest.raises(ValueError, match="verify"):
            ChatHistoryClient(http_client=http, verify=False)
    own = ChatHistoryClient(service.url)
    with own:
        assert own.summaries() == [ConversationSummary("conv", 1)]
    assert own.http.is_closed


@pytest.mark.anyio
async def test_the_async_client_closes_what_it_owns_only(service: BackgroundServer) -> None:
    async with httpx.AsyncClient(base_url=service.url) as http:
        async with AsyncChatHistoryClient(http_client=http) as client:
            assert await client.summaries() == []
        assert not http.is_closed
    async with AsyncChatHistoryClient(service.url) as own:
        await own.append("conv", [text("x")])
    assert own.http.is_closed
