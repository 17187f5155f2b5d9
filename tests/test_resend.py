"""Resent transcripts with the real agent, in each way the framework saves: per run, streaming, per model call.

A UI resends what the service returned, unchanged, edited (with and without ids) or without its tool steps; the
service must end up with each message once, the original conversation intact, and the session's state bag holding
only the key. The real MAF agent, the offline model and a real service over HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, ChatContext, ChatResponse, Message, chat_middleware

from chatlab.client.compaction import Compaction
from chatlab.client.errors import DivergentHistoryError
from chatlab.client.provider import KEY_FIELD, RemoteChatHistoryProvider
from chatlab.client.resend import is_tool_step
from chatlab.runner import BackgroundServer
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection
from chatlab.vocabulary import SUMMARY_THROUGH

pytestmark = pytest.mark.anyio
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS
MODES = ["per run", "streaming", "per model call"]


def make_agent(llm: LLMConnection, provider: RemoteChatHistoryProvider, mode: str, **kwargs: Any) -> Agent:
    if mode == "per model call":
        kwargs["require_per_service_call_history_persistence"] = True
    return create_agent(llm.client, provider, **kwargs)


async def run(agent: Agent, messages: str | list[Message], session: AgentSession, mode: str) -> list[Message]:
    """One run as the mode makes it; the response's messages."""
    if mode == "streaming":
        stream = agent.run(messages, session=session, stream=True)
        async for _ in stream:
            pass
        return list((await stream.get_final_response()).messages)
    return list((await agent.run(messages, session=session)).messages)


def wire(messages: list[Message]) -> list[dict[str, Any]]:
    return [message.to_dict() for message in messages]


async def first_turn(agent: Agent, provider: RemoteChatHistoryProvider, mode: str) -> tuple[AgentSession, str, list]:
    """The article's first turn; the session, its key and the transcript a UI keeps."""
    session = agent.create_session()
    await run(agent, FIRST, session, mode)
    return session, provider.conversation_key(session), list(await provider.get_messages(session))


async def branch_after(
    agent: Agent, provider: RemoteChatHistoryProvider, session: AgentSession, resent: list[Message], mode: str
) -> list[Message]:
    """Resend ``resent`` and a new question; check that the session moved and the original is intact; what the
    session's conversation holds then."""
    original = provider.conversation_key(session)
    before = wire(messages_from(await provider.client.read(original)))
    await run(agent, [*resent, Message("user", [AGAIN])], session, mode)
    assert provider.conversation_key(session) != original
    assert wire(messages_from(await provider.client.read(original))) == before
    return list(await provider.get_messages(session))


def holds_only_the_key(provider: RemoteChatHistoryProvider, session: AgentSession) -> bool:
    return session.state == {provider.source_id: {KEY_FIELD: provider.conversation_key(session)}}


@pytest.mark.parametrize("mode", MODES)
async def test_a_resent_transcript_and_a_new_turn_store_the_turn_once(
    service: BackgroundServer, llm: LLMConnection, mode: str
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = make_agent(llm, provider, mode)
        session = agent.create_session()
        for prompt in ARTICLE_PROMPTS:
            await run(agent, prompt, session, mode)
        key = provider.conversation_key(session)
        transcript = list(await provider.get_messages(session))
        assert len(transcript) == 10  # the article's three turns
        await run(agent, [*transcript, Message("user", [AGAIN])], session, mode)
        assert await provider.get_stored_message_count(key) == 14  # the question, the call, its result, the answer
        assert wire(list(await provider.get_messages(session))[:10]) == wire(transcript)
        assert holds_only_the_key(provider, session)


@pytest.mark.parametrize("mode", MODES)
async def test_an_edited_first_question_continues_on_a_new_conversation(
    service: BackgroundServer, llm: LLMConnection, mode: str
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = make_agent(llm, provider, mode)
        session, _, transcript = await first_turn(agent, provider, mode)
        edited = Message("user", [FIRST + " (東京で)"])
        stored = await branch_after(agent, provider, session, [edited, *transcript[1:]], mode)
        assert [m.text for m in stored if m.role == "user"] == [edited.text, AGAIN]  # each once, the edit kept
        assert len(stored) == 8
        assert holds_only_the_key(provider, session)


@pytest.mark.parametrize("mode", MODES)
async def test_an_edited_answer_keeping_its_id_continues_on_a_fork(
    service: BackgroundServer, llm: LLMConnection, mode: str
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = make_agent(llm, provider, mode)
        session, original, transcript = await first_turn(agent, provider, mode)
        answer = transcript[-1]
        edited = Message("assistant", [answer.text + "（編集済み）"], message_id=answer.message_id or "m-4")
        stored = await branch_after(agent, provider, session, [*transcript[:-1], edited], mode)
        fork = provider.conversation_key(session)
        assert wire(stored[:3]) == wire(transcript[:3])  # the fork: the history through message 3
        assert stored[3].text == edited.text  # the edit the model was shown is the one stored
        assert len(stored) == 8
        summaries = {s.conversation_key: s for s in await provider.get_conversation_summaries()}
        assert summaries[fork].tags.get("chatlab.forkOf") == original
        assert holds_only_the_key(provider, session)


@pytest.mark.parametrize("mode", MODES)
async def test_tool_steps_a_ui_leaves_out_are_not_a_divergence(
    service: BackgroundServer, llm: LLMConnection, mode: str
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = make_agent(llm, provider, mode)
        session, original, transcript = await first_turn(agent, provider, mode)
        shown = [message for message in transcript if not is_tool_step(message)]
        assert len(shown) == 2  # the question and the answer
        await run(agent, [*shown, Message("user", [AGAIN])], session, mode)
        assert provider.conversation_key(session) == original
        stored = list(await provider.get_messages(session))
        assert wire(stored[:4]) == wire(transcript)
        assert len(stored) == 8
        assert holds_only_the_key(provider, session)


@pytest.mark.parametrize("mode", MODES)
async def test_on_divergence_raise_names_the_message_and_writes_nothing(
    service: BackgroundServer, llm: LLMConnection, mode: str
) -> None:
    async with RemoteChatHistoryProvider(service.url, on_divergence="raise") as provider:
        agent = make_agent(llm, provider, mode)
        session, original, transcript = await first_turn(agent, provider, mode)
        edited = Message("assistant", ["ちがう答え"])
        with pytest.raises(DivergentHistoryError, match="at its message 4") as raised:
            await run(agent, [*transcript[:-1], edited, Message("user", [AGAIN])], session, mode)
        assert raised.value.position == 4
        assert provider.conversation_key(session) == original
        assert wire(messages_from(await provider.client.read(original))) == wire(transcript)
        assert len(await provider.get_conversation_summaries()) == 1  # no fork either


def messages_from(page: Any) -> list[Message]:
    from chatlab.client.codec import messages_from_meai

    return messages_from_meai(page.messages)


def outline(messages: list[Message]) -> list[tuple[str, str, list[str]]]:
    return [(m.role, m.text, [c.type for c in m.contents]) for m in messages]


def holds_once(stored: list[Message], turn: list[Message]) -> bool:
    """Whether ``turn`` is stored as one run in ``stored``, exactly once (by role, text and kinds of content: the
    response's own copies carry ids and timestamps the stored ones need not)."""
    stored_wire, turn_wire = outline(stored), outline(turn)
    starts = [i for i in range(len(stored)) if stored_wire[i : i + len(turn)] == turn_wire]
    return len(starts) == 1


def pausing_model(marker: str, reached: asyncio.Event, go: asyncio.Event) -> Callable[..., Awaitable[None]]:
    """A chat middleware that holds the model call of the run whose input carries ``marker`` until ``go``."""

    @chat_middleware
    async def pause(context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        if any(m.text == marker for m in context.messages) and not go.is_set():
            reached.set()
            await go.wait()
        await call_next()

    return pause


OVERLAPS = [
    *((mode, None) for mode in MODES),
    # with summary checkpoints too (saving per model call, a branch would be refused: see the last assertion)
    *((mode, Compaction(max_messages=4)) for mode in ("per run", "streaming")),
]


@pytest.mark.parametrize(("mode", "compaction"), OVERLAPS, ids=lambda value: "compaction" if value else str(value))
async def test_overlapping_runs_on_one_key_keep_their_own_state(
    service: BackgroundServer, llm: LLMConnection, mode: str, compaction: Compaction | None
) -> None:
    """A run that resends the transcript is held in its model call while a second run on the same key (a double
    submit) runs whole: each stores what it added, once, and each run's compaction reads its own view."""
    reached, go = asyncio.Event(), asyncio.Event()
    async with RemoteChatHistoryProvider(service.url, compaction=compaction) as provider:
        agent = make_agent(llm, provider, mode, middleware=[pausing_model(AGAIN, reached, go)])
        session, key, transcript = await first_turn(agent, provider, mode)
        other = agent.create_session()
        provider.attach_to_session(other, key)
        held = asyncio.create_task(run(agent, [*transcript, Message("user", [AGAIN])], session, mode))
        await reached.wait()
        second = await run(agent, ELAPSED, other, mode)
        go.set()
        first = await held
        theirs = [m for m in await provider.get_messages(other) if SUMMARY_THROUGH not in m.additional_properties]
        mine = [m for m in await provider.get_messages(session) if SUMMARY_THROUGH not in m.additional_properties]
        assert holds_once(theirs, [Message("user", [ELAPSED]), *second])
        assert holds_once(mine, [Message("user", [AGAIN]), *first])
        if compaction is not None:  # each run checked its own view, and summarized it
            assert any(SUMMARY_THROUGH in m.additional_properties for m in await provider.get_messages(session))
        if provider.conversation_key(session) == key:  # both turns on the one conversation, each once
            assert len(mine) == 4 + (1 + len(first)) + (1 + len(second))
        else:  # 1.23, per model call: the held run's later calls resend the transcript, now behind the other turn
            assert mode == "per model call"
            assert len(mine) == 4 + 1 + len(first) and len(theirs) >= 4 + 1 + len(second)


COVERAGE = "_agent_framework_service_history_coverage"  # Agent Framework 1.26's record for its FIDES checks


@chat_middleware
async def keeps_its_own_conversation(context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
    """The offline model answering as a model service that keeps the conversation (the Responses API with
    ``store=True``, which cannot run here) does: with a conversation id."""
    await call_next()
    if isinstance(context.result, ChatResponse):
        context.result.conversation_id = "conv_kept_by_the_model_service"


async def test_with_a_model_service_conversation_the_framework_adds_only_its_coverage_record(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    """What docs/conversations.md says: the provider's state is its key; Agent Framework 1.26 adds, after a run that
    started a service-kept conversation, a record of its own (an identity and a fingerprint, no messages), which its
    next run removes. chatlab leaves it: the framework's security checks read it."""
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider, middleware=[keeps_its_own_conversation])
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        key = provider.conversation_key(session)
        state = session.state[provider.source_id]
        assert set(session.state) == {provider.source_id} and state[KEY_FIELD] == key
        assert set(state) <= {KEY_FIELD, COVERAGE}
        if COVERAGE in state:
            assert set(state[COVERAGE]) == {"identity", "fingerprint"}
        await agent.run(AGAIN, session=session)
        assert session.state == {provider.source_id: {KEY_FIELD: key}}
