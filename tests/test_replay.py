"""Replay-safe saves: a caller that sends the whole transcript again with each turn stores it once.

The real MAF agent, the offline model and a real service over HTTP; a chat middleware records what the model is
sent, so the test sees both sides: what the service keeps and what the model gets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_framework import ChatContext, Content, Message, chat_middleware

from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.client.resend import Alignment, align, same_message
from chatlab.runner import BackgroundServer
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection

pytestmark = pytest.mark.anyio
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS


def user(text: str, message_id: str | None = None) -> Message:
    return Message("user", [text], message_id=message_id)


def replayed_count(history: list[Message], batch: list[Message]) -> int:
    alignment = align(history, batch)
    assert alignment.diverges_at is None
    return alignment.replayed


def test_the_longest_overlap_of_the_history_end_and_the_batch_start_counts() -> None:
    a, b, c, d = user("a"), user("b"), user("c"), user("d")
    assert replayed_count([a, b, c], [user("a"), user("b"), user("c"), d]) == 3  # the whole transcript again
    assert replayed_count([a, b, c], [user("b"), user("c"), d]) == 2  # its last part
    assert replayed_count([a, b, c], [d]) == 0  # an ordinary turn
    assert replayed_count([a, b, c], [user("b"), d]) == 0  # not the end of the history, and as much new as old
    assert replayed_count([a, b, c], [user("a")]) == 0  # a message asked again is a new turn
    assert replayed_count([], [a]) == replayed_count([a], []) == 0
    assert replayed_count([a, a], [user("a"), user("a"), user("a")]) == 2  # the longest one


def test_one_message_is_read_against_the_history_end_alone() -> None:
    call = Message("assistant", [Content.from_function_call("c1", "GetDateTime", arguments={})])
    result = Message("tool", [Content.from_function_result("c1", result="2026-04-16")])
    hi, answer = user("hi"), Message("assistant", ["hello"])
    assert replayed_count([hi, answer, user("hi")], [user("hi")]) == 1  # the end again, though it was said before
    assert replayed_count([hi, call, result], [user("hi")]) == 1  # tool steps after it are skipped
    assert replayed_count([hi, answer], [user("hi")]) == 0  # asked again after the answer: a new turn
    assert replayed_count([hi, call], [call]) == 1  # a tool step is compared with the end itself


def test_messages_are_compared_by_value_an_id_only_when_both_carry_one() -> None:
    assert not same_message(user("x", "m1"), user("edited", "m1"))  # an edit keeping its id is still an edit
    assert not same_message(user("x", "m1"), user("x", "m2"))
    assert same_message(user("x", "m1"), user("x"))  # a UI that drops ids resends the same message
    assert same_message(user("x"), user("x"))
    assert not same_message(user("x"), Message("assistant", ["x"]))  # the role is part of the bytes


def test_a_resend_that_differs_diverges_at_the_first_stored_message_it_differs_from() -> None:
    a, b, c, d, new = user("a"), user("b"), user("c"), user("d"), user("new")
    assert align([a, b, c, d], [user("A"), b, c, d, new]) == Alignment(replayed=0, diverges_at=0)
    assert align([a, b, c, d], [a, b, user("C"), d, new]) == Alignment(replayed=2, diverges_at=2)
    assert align([a, b, c, d], [a, b, c]) == Alignment(replayed=3, diverges_at=3)  # regenerate the last answer
    assert align([a, b, c, d], [user("x"), user("y"), c, new]) == Alignment()  # more new than old: a new turn
    assert align([a, b, c, d], [b, user("y")]) == Alignment()  # as much new as old, not from the start


def test_tool_steps_a_ui_leaves_out_are_not_a_difference() -> None:
    call = Message("assistant", [Content.from_function_call("c1", "GetDateTime", arguments={})])
    result = Message("tool", [Content.from_function_result("c1", result="12:00")])
    question, answer = user("what time is it?"), Message("assistant", ["12:00"])
    history = [question, call, result, answer]
    assert align(history, [question, answer, user("and now?")]) == Alignment(replayed=2)
    edited = Message("assistant", ["twelve o'clock"])
    assert align(history, [question, edited, user("and now?")]) == Alignment(replayed=1, diverges_at=3)


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
