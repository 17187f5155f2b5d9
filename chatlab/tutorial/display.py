"""The article's ``Print...`` helpers as functions printing its exact lines (read them beside its ``実行結果``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import httpx
from agent_framework import AgentSession, Content, Message

from ..client.provider import RemoteChatHistoryProvider
from ..vocabulary import kind_of_maf


async def print_external_store(provider: RemoteChatHistoryProvider) -> None:
    """``[External Store]`` then one ``External Store Key: ..., Messages Count: N`` line per conversation."""
    print("[External Store]")
    for summary in await provider.get_conversation_summaries():
        print(f"External Store Key: {summary.conversation_key}, Messages Count: {summary.message_count}")


def print_session_id(name: str, provider: RemoteChatHistoryProvider, session: AgentSession) -> None:
    """``[Session1] SessionId: <key>`` (the article calls the conversation key the session id)."""
    key = provider.try_get_external_conversation_key(session)
    if key is not None:
        print(f"[{name}] SessionId: {key}")


def print_state_bag(session: AgentSession) -> None:
    """``stateBagCount:1`` and a ``stateBag Key: ..., ValueKind: Object, Value: {...}`` line per state entry."""
    state = session.to_dict().get("state") or {}
    print(f"stateBagCount:{len(state)}")
    for key, value in state.items():
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        print(f"stateBag Key: {key}, ValueKind: {_value_kind(value)}, Value: {text}")


def print_agent_response(response: Any) -> None:
    """Print a run's answer under ``[Response]``, as the article's Program.cs does."""
    print("[Response]")
    print(response.text if hasattr(response, "text") else response)


def print_messages(messages: Iterable[Message]) -> None:
    """``Role: user, Contents: TextContent: ...`` per message (the article's ``PrintMessages``)."""
    for message in messages:
        print(f"Role: {message.role}, Contents: {', '.join(_format_content(c) for c in message.contents)}")


async def create_or_resume_session(
    agent: Any, provider: RemoteChatHistoryProvider, session_id: str | None = None
) -> AgentSession:
    """A new session, or one attached to ``session_id`` if the service has that conversation."""
    session: AgentSession = agent.create_session()
    if session_id is None or not session_id.strip():
        print("[Session] 新しいセッションを開始します。")
        return session
    if not await provider.session_exists(session_id):
        print(f"[Session] セッションID '{session_id}' は見つからなかったため、新しいセッションを開始します。")
        return session
    provider.attach_to_session(session, session_id)
    print(f"[Session] セッションID '{session_id}' を再開しました。")
    return session


def _format_content(content: Content) -> str:
    kind = kind_of_maf(content.type)
    name = kind.csharp if kind is not None and kind.csharp else content.type
    return f"{name}: {content.text}" if content.type == "text" else name


def _value_kind(value: Any) -> str:
    """The name .NET's ``JsonValueKind`` gives a JSON value."""
    kinds: dict[type, str] = {type(None): "Null", bool: str(value), dict: "Object", list: "Array", str: "String"}
    return kinds.get(type(value), "Number")


def print_response(response: httpx.Response) -> None:
    """One HTTP exchange (the service notebooks): request line, status, the telling headers, indented JSON."""
    request = response.request
    status = f"{response.status_code} {HTTPStatus(response.status_code).phrase}"
    print(f"{request.method} {request.url.raw_path.decode()} -> {status}")
    for name in ("location", "etag", "retry-after", "www-authenticate", "content-type"):
        if name in response.headers:
            print(f"{name.title()}: {response.headers[name]}")
    if response.content:
        try:
            print(json.dumps(response.json(), ensure_ascii=False, indent=2))
        except ValueError:
            print(response.text)
