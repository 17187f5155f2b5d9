"""RemoteChatHistoryProvider's own API (the article's table) and display helpers, against a real service."""

from __future__ import annotations

import re

import httpx
import pytest
from agent_framework import AgentSession, Content, Message

from chatlab.client.errors import ChatHistoryServiceStatusError
from chatlab.client.provider import DEFAULT_SERVICE_URL, ChatHistorySummary, RemoteChatHistoryProvider
from chatlab.runner import BackgroundServer
from chatlab.tutorial.display import (
    create_or_resume_session,
    print_external_store,
    print_messages,
    print_session_id,
    print_state_bag,
)

pytestmark = pytest.mark.anyio


class _Agent:
    """Just enough of an agent for create_or_resume_session (it only creates sessions)."""

    def create_session(self) -> AgentSession:
        return AgentSession()


def conversation() -> list[Message]:
    return [
        Message("user", ["現在時刻を教えてください"]),
        Message(
            "assistant",
            [Content.from_function_call("call_1", "GetDateTime", arguments="{}")],
            author_name="SampleAgent",
        ),
        Message("tool", [Content.from_function_result("call_1", result="2026-04-16 01:30:52")]),
        Message("assistant", ["現在の日時は **2026-04-16 01:30:52** です。"], author_name="SampleAgent"),
    ]


async def test_url_from_argument_environment_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAT_HISTORY_SERVICE_URL", raising=False)
    async with RemoteChatHistoryProvider() as provider:
        assert provider.url == DEFAULT_SERVICE_URL == "http://localhost:5000"
    monkeypatch.setenv("CHAT_HISTORY_SERVICE_URL", "http://history.example:8080/")
    async with RemoteChatHistoryProvider() as provider:
        assert provider.url == "http://history.example:8080"
    async with RemoteChatHistoryProvider("http://elsewhere:1") as provider:
        assert provider.url == "http://elsewhere:1"


async def test_keys_state_and_attach() -> None:
    async with RemoteChatHistoryProvider("http://unused") as provider:
        assert provider.state_keys == ["RemoteChatHistoryProvider"]
        session = AgentSession()
        assert provider.try_get_external_conversation_key(session) is None
        key = provider.conversation_key(session)
        assert re.fullmatch(r"[0-9a-f]{32}", key)
        assert provider.conversation_key(session) == key == provider.try_get_external_conversation_key(session)
        provider.attach_to_session(session, "existing-key")
        assert session.state == {"RemoteChatHistoryProvider": {"externalConversationKey": "existing-key"}}
        with pytest.raises(ValueError):
            provider.attach_to_session(session, " ")


async def test_a_state_initializer_and_state_key_are_used() -> None:
    seen: list[AgentSession | None] = []

    def initializer(session: AgentSession | None) -> str:
        seen.append(session)
        return "user-42"

    async with RemoteChatHistoryProvider(
        "http://unused", state_initializer=initializer, state_key="History"
    ) as provider:
        session = AgentSession()
        assert provider.conversation_key(session) == "user-42"
        assert seen == [session] and session.state == {"History": {"externalConversationKey": "user-42"}}
        assert provider.state_keys == ["History"]


async def test_get_set_summaries_exists(service: BackgroundServer) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        session = AgentSession()
        assert await provider.get_messages(session) == []  # no key yet: nothing to read
        await provider.set_messages(session, conversation())  # no key: nothing to replace
        assert await provider.get_conversation_summaries() == []

        key = provider.conversation_key(session)
        assert not await provider.session_exists(key)
        await provider.set_messages(session, conversation())
        assert await provider.session_exists(key)
        assert await provider.get_conversation_summaries() == [ChatHistorySummary(key, 4)]
        assert [m.to_dict() for m in await provider.get_messages(session)] == [m.to_dict() for m in conversation()]

        await provider.set_messages(session, conversation()[:1])
        assert await provider.get_stored_message_count(key) == 1
        await provider.append_messages(key, conversation()[1:])
        assert await provider.get_stored_message_count(key) == 4


async def test_a_key_the_service_refuses_is_a_clear_error_not_another_path(service: BackgroundServer) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        session = AgentSession()
        provider.attach_to_session(session, "../chat-history")  # quoted: stays one path segment
        with pytest.raises(ChatHistoryServiceStatusError) as caught:
            await provider.set_messages(session, conversation())
        assert caught.value.status is not None and 400 <= caught.value.status < 500
        assert "..%2Fchat-history" in str(caught.value) and f"HTTP {caught.value.status}" in str(caught.value)
        assert await provider.get_conversation_summaries() == []


async def test_it_closes_only_the_client_it_owns(service: BackgroundServer) -> None:
    provider = RemoteChatHistoryProvider(service.url)
    await provider.aclose()
    assert provider.client.http.is_closed
    async with httpx.AsyncClient() as http:
        async with RemoteChatHistoryProvider(service.url, http_client=http) as provider:
            await provider.get_conversation_summaries()
        assert not http.is_closed


async def test_something_that_is_not_the_service_is_named(service: BackgroundServer) -> None:
    async with RemoteChatHistoryProvider(f"{service.url}/nope") as provider:
        with pytest.raises(Exception) as caught:
            await provider.get_conversation_summaries()
    assert "HTTP 404" in str(caught.value) and f"{service.url}/nope/chat-history" in str(caught.value)


async def test_create_or_resume_session_prints_the_articles_lines(
    service: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        new = await create_or_resume_session(_Agent(), provider, None)
        assert provider.try_get_external_conversation_key(new) is None
        missing = await create_or_resume_session(_Agent(), provider, "0" * 32)
        assert provider.try_get_external_conversation_key(missing) is None

        existing = AgentSession()
        key = provider.conversation_key(existing)
        await provider.set_messages(existing, conversation())
        resumed = await create_or_resume_session(_Agent(), provider, key)
        assert provider.try_get_external_conversation_key(resumed) == key
    assert capsys.readouterr().out.splitlines() == [
        "[Session] 新しいセッションを開始します。",
        f"[Session] セッションID '{'0' * 32}' は見つからなかったため、新しいセッションを開始します。",
        f"[Session] セッションID '{key}' を再開しました。",
    ]


async def test_display_helpers_print_the_articles_lines(
    service: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        session = AgentSession()
        provider.attach_to_session(session, "286d2f0b7b7a43688ad32556e3610f54")
        await provider.set_messages(session, conversation())
        await print_external_store(provider)
        print_session_id("Session1", provider, session)
        print_session_id("Nothing", provider, AgentSession())
        print_state_bag(session)
        print_messages(conversation()[:3])
        print_state_bag(AgentSession())
    assert capsys.readouterr().out.splitlines() == [
        "[External Store]",
        "External Store Key: 286d2f0b7b7a43688ad32556e3610f54, Messages Count: 4",
        "[Session1] SessionId: 286d2f0b7b7a43688ad32556e3610f54",
        "stateBagCount:1",
        "stateBag Key: RemoteChatHistoryProvider, ValueKind: Object, "
        'Value: {"externalConversationKey":"286d2f0b7b7a43688ad32556e3610f54"}',
        "Role: user, Contents: TextContent: 現在時刻を教えてください",
        "Role: assistant, Contents: FunctionCallContent",
        "Role: tool, Contents: FunctionResultContent",
        "stateBagCount:0",
    ]


def test_new_keys_are_32_hex_guids_that_sort_in_creation_order() -> None:
    import uuid

    from chatlab.client.provider import new_conversation_key

    keys = [new_conversation_key() for _ in range(2000)]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for key in keys[:10]:
        assert len(key) == 32 and uuid.UUID(key).hex == key and uuid.UUID(key).version == 7


async def test_providers_can_share_one_client(service: BackgroundServer) -> None:
    from chatlab.client import AsyncChatHistoryClient

    async with AsyncChatHistoryClient(service.url) as client:
        first = RemoteChatHistoryProvider(client=client)
        second = RemoteChatHistoryProvider(client=client, state_key="Other")
        await first.append_messages("shared", conversation())
        assert await second.get_stored_message_count("shared") == 4 and second.url == service.url
        await first.aclose()
        assert not client.http.is_closed  # the caller's client stays open
        with pytest.raises(ValueError, match="client="):
            RemoteChatHistoryProvider(service.url, client=client)


async def test_a_runs_history_is_a_snapshot_that_later_turns_do_not_change(service: BackgroundServer) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        state = {"externalConversationKey": "snapshot"}
        await provider.save_messages(None, conversation(), state=state)
        first = await provider.get_messages(None, state=state)  # cached: later turns extend the same list
        await provider.save_messages(None, conversation()[:1], state=state)
        second = await provider.get_messages(None, state=state)
        assert (len(first), len(second)) == (4, 5) and list(first) == list(second)[:4]
        assert [m.text for m in first[-2:]] == ["", "現在の日時は **2026-04-16 01:30:52** です。"]
        assert second[-1].text == "現在時刻を教えてください" and second[4] is second[-1]
        with pytest.raises(IndexError):
            first[4]
        assert first == [*second][:4] and repr(first).startswith("[")
