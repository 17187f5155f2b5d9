"""Replay-safe saves: a caller that sends the whole transcript again with each turn stores it once.

The real MAF agent, the offline model and a real service over HTTP; a chat middleware records what the model is
sent, so the test sees both sides: what the service keeps and what the model gets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_framework import ChatContext, Message, chat_middleware

from chatlab.client.provider import RemoteChatHistoryProvider, replayed_count, same_message
from chatlab.runner import BackgroundServer
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection

pytestmark = pytest.mark.anyio
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS


def user(text: str, message_id: str | None = None) -> Message:
    return Message("user", [text], message_id=message_id)


def test_the_longest_overlap_of_the_history_end_and_the_batch_start_counts() -> None:
    a, b, c, d = user("a"), user("b"), user("c"), user("d")
    assert replayed_count([a, b, c], [user("a"), user("b"), user("c"), d]) == 3  # the whole transcript again
    assert replayed_count([a, b, c], [user("b"), user("c"), d]) == 2  # its last part
    assert replayed_count([a, b, c], [d]) == 0  # an ordinary turn
    assert replayed_count([a, b, c], [user("b"), d]) == 0  # not the end of the history
    assert replayed_count([], [a]) == replayed_count([a], []) == 0
    assert replayed_count([a, a], [user("a"), user("a"), user("a")]) == 2  # the longest one


def test_ids_decide_when_both_messages_have_one_and_bytes_otherwise() -> None:
    assert same_message(user("x", "m1"), user("other text", "m1"))
    assert not same_message(user("x", "m1"), user("x", "m2"))
    assert not same_message(user("x", "m1"), user("x"))  # one without an id: the bytes differ by the id
    assert same_message(user("x"), user("x"))
    assert not same_message(user("x"), Message("assistant", ["x"]))  # the role is part of the bytes


def recording_model(seen: list[list[str]]) -> Callable[..., Awaitable[None]]:
    @chat_middleware
    async def record(context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        seen.append([m.text for m in context.messages if m.role == "user"])
        await call_next()

    return record


async def transcript(provider: RemoteChatHistoryProvider, session: Any) -> list[Message]:
    """What a UI keeps: the conversation as the service returns it."""
    return list(await provider.get_messages(session))


async def test_a_replayed_transcript_is_stored_once_and_the_model_sees_it_once(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    seen: list[list[str]] = []
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider, middleware=[recording_model(seen)])
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        key = provider.conversation_key(session)
        for prompt in (AGAIN, ELAPSED):  # each turn, the UI sends everything so far and the new message
            await agent.run([*await transcript(provider, session), user(prompt)], session=session)
        assert await provider.get_stored_message_count(key) == 10  # the article's count, nothing twice
        roles = [m.role for m in await provider.get_messages(session)]
        assert roles == ["user", "assistant", "tool", "assistant"] * 2 + ["user", "assistant"]
        assert [FIRST, AGAIN, ELAPSED] in seen  # the last turn's model call: each user message once
        assert all(len(users) == len(set(users)) for users in seen)


async def test_a_replayed_window_and_an_ordinary_turn_mix(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        stored = await transcript(provider, session)
        await agent.run([*stored[-2:], user(AGAIN)], session=session)  # only the transcript's end replayed
        await agent.run(ELAPSED, session=session)  # then an ordinary turn
        assert await provider.get_stored_message_count(provider.conversation_key(session)) == 10


async def test_replay_detection_can_be_turned_off(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url, skip_replayed=False) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        await agent.run([*await transcript(provider, session), user(AGAIN)], session=session)
        assert await provider.get_stored_message_count(provider.conversation_key(session)) == 4 + 4 + 4
