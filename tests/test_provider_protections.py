"""The provider against a protected service: its API key, TLS it verifies, and retries that never duplicate.

The fault injection is a real TCP proxy between the provider and a live service
(:class:`tests.faults.DroppingProxy`): it forwards an append to the service, waits for the
service's answer (so the append is committed), then closes the connection instead of
forwarding that answer.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent_framework import Message

from chatlab.client.errors import ChatHistoryServiceStatusError, ChatHistoryServiceUnavailable
from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.client.retry import RetryPolicy, retry_after_seconds
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore
from chatlab.stores.base import Idempotency, WriteResult
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.llm import LLMConnection
from tests.faults import DroppingProxy, FlakyGateway

pytestmark = pytest.mark.anyio
KEY = "provider-0123456789abcdef-key"
FAST = RetryPolicy(attempts=4, backoff=0.01, max_backoff=0.05)


def user(text: str) -> Message:
    return Message(role="user", contents=[text])


class RecordingStore(InMemoryChatHistoryStore):
    """The in-memory store, noting what each append did (applied, or replayed from its idempotency record)."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[tuple[str | None, bool]] = []

    async def append(
        self, conversation_key, messages, *, if_match=None, idempotency: Idempotency | None = None
    ) -> WriteResult:
        result = await super().append(conversation_key, messages, if_match=if_match, idempotency=idempotency)
        self.appends.append((idempotency.key if idempotency else None, result.replayed))
        return result


@pytest.fixture
def store() -> RecordingStore:
    return RecordingStore()


@pytest.fixture
def keyed(store: RecordingStore) -> Iterator[BackgroundServer]:
    settings = ServiceSettings(api_keys={KEY: "agents"})
    with BackgroundServer(create_app(store, settings), name="provider-keyed") as server:
        yield server


@pytest.fixture
def proxy(keyed: BackgroundServer) -> Iterator[DroppingProxy]:
    dropping = DroppingProxy(keyed.port)
    yield dropping
    dropping.close()


async def test_a_lost_answer_to_an_append_is_retried_and_stored_once(
    proxy: DroppingProxy, store: RecordingStore
) -> None:
    async with RemoteChatHistoryProvider(proxy.url, api_key=KEY, retry=FAST) as provider:
        await provider.append_messages("conv", [user("one"), user("two")])
        assert proxy.dropped == 1  # the first answer never reached the provider
        (first_key, first_replayed), (retry_key, retry_replayed) = store.appends
        assert first_key == retry_key and not first_replayed and retry_replayed  # the retry was a replay
        assert [m.text for m in await provider.get_messages(None, state={"externalConversationKey": "conv"})] == [
            "one",
            "two",
        ]
        await provider.append_messages("conv", [user("three")])  # a new append: a new key, applied
        assert await provider.get_stored_message_count("conv") == 3
        assert store.appends[-1][0] != first_key


async def test_without_retries_the_lost_answer_is_an_error_and_nothing_is_duplicated(
    proxy: DroppingProxy, store: RecordingStore
) -> None:
    async with RemoteChatHistoryProvider(proxy.url, api_key=KEY, retry=None) as provider:
        with pytest.raises(ChatHistoryServiceUnavailable, match="did not answer POST"):
            await provider.append_messages("conv", [user("one")])
        assert await provider.get_stored_message_count("conv") == 1  # stored, though the answer was lost


async def test_an_agent_run_whose_append_answer_is_lost_stores_the_run_once(
    proxy: DroppingProxy, store: RecordingStore, llm: LLMConnection
) -> None:
    async with RemoteChatHistoryProvider(proxy.url, api_key=KEY, retry=FAST) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run("現在時刻を教えてください", session=session)
        assert proxy.dropped == 1
        key = provider.conversation_key(session)
        assert await provider.get_stored_message_count(key) == 4  # the article's count, not 8


@pytest.mark.parametrize("status", [502, 503, 504, 429])
async def test_transient_statuses_are_retried(status: int) -> None:
    store = InMemoryChatHistoryStore()
    gateway = FlakyGateway(create_app(store), [status, status])
    with BackgroundServer(gateway, name="flaky") as server:
        async with RemoteChatHistoryProvider(server.url, retry=FAST) as provider:
            await provider.append_messages("conv", [user("once")])
            assert await provider.get_stored_message_count("conv") == 1
    assert gateway.seen == 2


async def test_retries_give_up_after_the_attempts_with_the_last_error() -> None:
    gateway = FlakyGateway(create_app(InMemoryChatHistoryStore()), [503] * 10)
    with BackgroundServer(gateway, name="flaky") as server:
        async with RemoteChatHistoryProvider(server.url, retry=FAST) as provider:
            with pytest.raises(ChatHistoryServiceStatusError) as caught:
                await provider.get_conversation_summaries()
    assert caught.value.status == 503 and gateway.seen == 4


async def test_retry_after_is_honoured_and_a_too_long_one_ends_the_retries() -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(attempts=3, backoff=0.01, max_retry_after=30, sleep=record)
    gateway = FlakyGateway(create_app(InMemoryChatHistoryStore()), [429], retry_after="7")
    with BackgroundServer(gateway, name="flaky") as server:
        async with RemoteChatHistoryProvider(server.url, retry=policy) as provider:
            assert await provider.get_conversation_summaries() == []
        assert waits == [7.0]

        gateway.statuses, gateway.retry_after, gateway.seen = [429, 429], "3600", 0
        async with RemoteChatHistoryProvider(server.url, retry=policy) as provider:
            with pytest.raises(ChatHistoryServiceStatusError) as caught:
                await provider.get_conversation_summaries()
        assert caught.value.status == 429 and gateway.seen == 1 and waits == [7.0]


async def test_the_real_rate_limit_is_waited_out() -> None:
    waits: list[float] = []

    async def record_and_wait(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(seconds)

    settings = ServiceSettings(rate_limit="1/s")
    store = InMemoryChatHistoryStore()
    with BackgroundServer(create_app(store, settings), name="limited") as server:
        policy = RetryPolicy(attempts=3, backoff=0.01, sleep=record_and_wait)
        async with RemoteChatHistoryProvider(server.url, retry=policy) as provider:
            await provider.append_messages("conv", [user("a")])
            await provider.append_messages("conv", [user("b")])  # 429 Retry-After: 1, then accepted
    assert waits and waits[0] >= 1.0
    assert len(await store.get("conv")) == 2


async def test_refusals_are_not_retried(keyed: BackgroundServer, store: RecordingStore) -> None:
    async with RemoteChatHistoryProvider(keyed.url, api_key="wrong-0123456789abcdef", retry=FAST) as provider:
        with pytest.raises(ChatHistoryServiceStatusError) as caught:
            await provider.append_messages("conv", [user("x")])
    assert caught.value.status == 401
    assert "CHAT_HISTORY_SERVICE_API_KEY" in str(caught.value) and "wrong-0123456789abcdef" not in str(caught.value)
    assert store.appends == []


async def test_the_api_key_comes_from_the_environment(keyed: BackgroundServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAT_HISTORY_SERVICE_API_KEY", KEY)
    async with RemoteChatHistoryProvider(keyed.url) as provider:
        await provider.append_messages("conv", [user("x")])
        assert [s.conversation_key for s in await provider.get_conversation_summaries()] == ["conv"]
        assert KEY not in repr(provider)


def test_retry_after_values() -> None:
    assert retry_after_seconds("5") == 5.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: now
    assert retry_after_seconds("Fri, 31 Dec 9999 23:59:59 GMT") > 3000


# -- TLS -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_service(pki: dict[str, Path]) -> Iterator[BackgroundServer]:
    app = create_app(InMemoryChatHistoryStore(), ServiceSettings(api_keys={KEY: "agents"}))
    with BackgroundServer(app, name="provider-tls", ssl_certfile=pki["cert"], ssl_keyfile=pki["key"]) as s:
        yield s


async def test_the_provider_verifies_the_service_certificate(
    tls_service: BackgroundServer, pki: dict[str, Path]
) -> None:
    async with RemoteChatHistoryProvider(tls_service.url, api_key=KEY, verify=pki["ca"]) as provider:
        await provider.append_messages("conv", [user("over TLS")])
        assert await provider.get_stored_message_count("conv") == 1

    async with RemoteChatHistoryProvider(tls_service.url, api_key=KEY, retry=FAST) as provider:  # default CAs
        with pytest.raises(ChatHistoryServiceUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            await provider.get_conversation_summaries()

    context = ssl.create_default_context(cafile=str(pki["ca"]))
    async with httpx.AsyncClient(verify=context) as own:  # a caller-owned client brings its own verification
        provider = RemoteChatHistoryProvider(tls_service.url, http_client=own, api_key=KEY)
        assert await provider.get_stored_message_count("conv") == 1
        with pytest.raises(ValueError, match="verify"):
            RemoteChatHistoryProvider(tls_service.url, http_client=own, verify=False)
