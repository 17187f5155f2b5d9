"""The provider's summary checkpoints and forks, end to end: the real MAF agent, the offline model, a real service.

A chat middleware records what the model is sent on each turn, so the tests see both sides: the model's input stays
bounded while the service keeps the whole transcript.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from agent_framework import ChatContext, CompactionProvider, ToolResultCompactionStrategy, chat_middleware

from chatlab.client.compaction import Compaction
from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.runner import BackgroundServer
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection
from chatlab.vocabulary import SUMMARY_THROUGH

pytestmark = pytest.mark.anyio
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS


def recording_model(sizes: list[int]) -> Callable[..., Awaitable[None]]:
    @chat_middleware
    async def record(context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        sizes.append(len(context.messages))
        await call_next()

    return record


async def test_checkpoints_bound_what_the_model_sees_and_the_service_keeps_everything(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    sizes: list[int] = []
    async with RemoteChatHistoryProvider(service.url, compaction=Compaction(max_messages=6)) as provider:
        agent = create_agent(llm.client, provider, middleware=[recording_model(sizes)])
        session = agent.create_session()
        answers = [(await agent.run(prompt, session=session)).text for prompt in [FIRST, AGAIN] * 4 + [ELAPSED]]
        stored = await provider.get_messages(session)
        checkpoints = [m for m in stored if SUMMARY_THROUGH in (m.additional_properties or {})]

        assert len(stored) == 4 * 8 + 2 + len(checkpoints)  # every turn kept, checkpoints added
        assert len(checkpoints) >= 3
        throughs = [m.additional_properties[SUMMARY_THROUGH] for m in checkpoints]
        assert throughs == sorted(throughs) and all(
            stored.index(c) >= n for c, n in zip(checkpoints, throughs, strict=True)
        )
        assert max(sizes) <= 6 + 4 + 2  # the view past the threshold, a turn's messages, the instructions
        # the first time is found in the summary the model reads: the elapsed answer still spans all turns
        first_time = next(c.result for m in stored for c in m.contents if c.type == "function_result")
        assert first_time in answers[-1]


async def test_without_compaction_the_model_sees_the_whole_conversation(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    sizes: list[int] = []
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider, middleware=[recording_model(sizes)])
        session = agent.create_session()
        for prompt in [FIRST, AGAIN] * 4:
            await agent.run(prompt, session=session)
        assert max(sizes) > 6 + 4 + 2


async def test_maf_compaction_provider_composes_with_checkpoints(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url, compaction=Compaction(max_messages=8)) as provider:
        trim = CompactionProvider(
            before_strategy=ToolResultCompactionStrategy(keep_last_tool_call_groups=1),
            history_source_id=provider.source_id,
        )
        agent = create_agent(llm.client, provider)
        agent.context_providers.append(trim)
        session = agent.create_session()
        for prompt in [FIRST, AGAIN] * 3 + [ELAPSED]:
            await agent.run(prompt, session=session)
        assert await provider.get_stored_message_count(provider.conversation_key(session)) >= 4 * 6 + 2


async def test_a_forked_session_continues_a_copy(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        with pytest.raises(ValueError, match="run it once"):
            await provider.fork_session(session)
        await agent.run(FIRST, session=session)
        await agent.run(AGAIN, session=session)
        branch = await provider.fork_session(session, through=4)
        key, branch_key = provider.conversation_key(session), provider.conversation_key(branch)
        assert branch_key != key and await provider.get_stored_message_count(branch_key) == 4
        answer = (await agent.run(ELAPSED, session=branch)).text
        assert "経過" not in answer or "計算できません" in answer  # the branch holds only the first time
        assert await provider.get_stored_message_count(key) == 8  # the origin is untouched
        assert await provider.get_stored_message_count(branch_key) == 6


async def test_a_turn_reads_the_summary_view_once(service: BackgroundServer, llm: LLMConnection) -> None:
    """The view after a run is the loaded one plus what the run appended: no second read to decide on a checkpoint."""
    views: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "GET" and request.url.params.get("view") == "summary":
            views.append(str(request.url))

    async with httpx.AsyncClient(base_url=service.url, event_hooks={"request": [record]}) as http:
        provider = RemoteChatHistoryProvider(service.url, http_client=http, compaction=Compaction(max_messages=6))
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        turns = [FIRST, AGAIN] * 3
        for prompt in turns:
            await agent.run(prompt, session=session)
        stored = await provider.get_messages(session)
        assert any(SUMMARY_THROUGH in (m.additional_properties or {}) for m in stored)  # checkpoints were written
        assert len(views) == len(turns)  # one summary view read per turn: the load before it
