"""``python -m chatlab demo``: the article's whole run in a terminal (its ``実行結果`` line by line), then again.

Each run checks that the conversation grew on the service and that the run loaded what was stored before it, so that
a broken provider never looks like success."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from typing import Any

import httpx
from agent_framework import AgentSession, Message

from ..client.errors import ChatlabError
from ..client.provider import RemoteChatHistoryProvider, show_provider_calls
from ..vocabulary import SERVICE_URL_VARIABLE
from .agent import MAX_OUTPUT_TOKENS, create_agent
from .display import (
    create_or_resume_session,
    print_agent_response,
    print_external_store,
    print_session_id,
    print_state_bag,
)
from .llm import LLMConnection, connect_llm

ARTICLE_PROMPTS = (
    "現在時刻を教えてください",
    "もう一度現在時刻を取得してください",
    "最初の時刻からどれくらい経過していますか?",
)
ARTICLE_PAUSE = 10.0  # seconds the article waits between its two time prompts (``await Task.Delay(10000)``)


class HistoryCheckFailed(ChatlabError):
    """A run's history did not persist on the service, or was not loaded before the next run."""


class CheckedProvider(RemoteChatHistoryProvider):
    """The provider, remembering how many messages each conversation's last load handed the agent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loaded: dict[str, int] = {}

    async def get_messages(  # type: ignore[override]  # the provider's Sequence (its cache's view), not MAF's list
        self, session_id: AgentSession | str | None = None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> Sequence[Message]:
        """The provider's messages, their count noted per conversation (the demo checks each run loaded them all)."""
        messages = await super().get_messages(session_id, state=state, **kwargs)
        key = state.get("externalConversationKey") if isinstance(state, dict) else None
        if isinstance(key, str):  # a load for a run (the framework passes the state), not a helper call
            self.loaded[key] = len(messages)
        return messages


async def run_article_scenario(agent: Any, provider: CheckedProvider, pause: float) -> list[str]:
    """The article's Program.cs after the agent is built; returns the two sessions' keys."""
    first, again, elapsed = ARTICLE_PROMPTS
    session1 = await create_or_resume_session(agent, provider, None)
    session2 = agent.create_session()
    await print_external_store(provider)

    await _checked_run(agent, provider, "Session1", session1, first)
    print_session_id("Session1", provider, session1)
    await print_external_store(provider)

    await asyncio.sleep(pause)  # the article waits 10 s
    await _checked_run(agent, provider, "Session1", session1, again)
    await print_external_store(provider)

    await _checked_run(agent, provider, "Session1", session1, elapsed)
    await print_external_store(provider)

    await _checked_run(agent, provider, "Session2", session2, first)
    print_session_id("Session2", provider, session2)
    await print_external_store(provider)

    for name, session in (("Session1", session1), ("Session2", session2)):
        print(f"[{name}]")
        print_state_bag(session)
    return [provider.conversation_key(session1), provider.conversation_key(session2)]


async def _checked_run(agent: Any, provider: CheckedProvider, name: str, session: AgentSession, prompt: str) -> None:
    earlier_key = provider.try_get_external_conversation_key(session)
    before = await provider.get_stored_message_count(earlier_key) if earlier_key else 0
    if earlier_key:
        provider.loaded.pop(earlier_key, None)  # what this run loads, not an earlier run
    print_agent_response(await agent.run(prompt, session=session))
    key = provider.conversation_key(session)
    loaded = provider.loaded.get(key)
    if before and not loaded:
        how = "none of them" if loaded == 0 else "nothing (its get_messages was not called)"
        raise HistoryCheckFailed(
            f"the history did not load: {name}'s conversation {key} held {before} messages before the run "
            f"'{prompt}', but the provider handed the agent {how}. The model answered without its history."
        )
    after = await provider.get_stored_message_count(key)
    if after <= before:
        raise HistoryCheckFailed(
            f"the history did not persist: after the run '{prompt}' {name}'s conversation {key} holds {after} "
            f"messages on the service at {provider.url} (before the run: {before}). The provider's appends did not "
            "reach the service's store: check that the URL is the chat history service itself and what lies between."
        )


async def run_demo(
    pause: float = ARTICLE_PAUSE,
    service_url: str | None = None,
    llm_mode: str | None = None,
    runs: int = 2,
    http_client: httpx.AsyncClient | None = None,
    max_output_tokens: int = MAX_OUTPUT_TOKENS,
) -> None:
    """Run the scenario ``runs`` times against one service (started in a thread unless ``service_url`` or
    ``CHAT_HISTORY_SERVICE_URL`` names one); the providers send their requests with ``http_client``, and no model
    call generates more than ``max_output_tokens``."""
    from ..runner import BackgroundServer
    from ..service import create_app

    url = service_url or os.environ.get(SERVICE_URL_VARIABLE)
    service = None
    if url:
        print(f"[Service] using the chat history service at {url}")
    else:
        service = await asyncio.to_thread(BackgroundServer(create_app(), name="demo-chat-history-service").start)
        url = service.url
        print(f"[Service] chat history service started in the background at {url}")
    if pause != ARTICLE_PAUSE:
        print(f"[Wait] {pause:g} s between the two time prompts (--pause), not the article's {ARTICLE_PAUSE:g} s")
    show_provider_calls()
    llm: LLMConnection | None = None
    try:
        llm = await connect_llm(llm_mode)
        async with RemoteChatHistoryProvider(url) as observer:  # two conversations a run
            earlier = math.ceil(len(await observer.get_conversation_summaries()) / 2)
        for run in range(earlier + 1, earlier + runs + 1):
            print(f"\n===== {_title(run, earlier)} =====")
            provider = CheckedProvider(url, http_client=http_client)
            async with provider:
                agent = create_agent(llm.client, provider, max_output_tokens=max_output_tokens)
                await run_article_scenario(agent, provider, pause)
    finally:
        show_provider_calls(False)
        if llm is not None:
            await llm.aclose()
        if service is not None:
            await asyncio.to_thread(service.stop)


def _title(run: int, earlier: int) -> str:
    if run == 1:
        return "1回目の実行 (run 1: a new provider and agent)"
    kept = f"the service already held {earlier * 2} conversations" if earlier else "the same service"
    return f"チャット履歴管理サーバーを保持したまま{run}回目の実行 (run {run}: a new provider and agent, {kept})"
