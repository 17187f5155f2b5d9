"""``python -m chatlab demo``: the article's whole run in a terminal, then the second run.

The chat history service runs in a background thread unless ``CHAT_HISTORY_SERVICE_URL``
(or ``--service-url``) names one already running; the LLM is chosen by ``CHATLAB_LLM``
(the offline tutorial model unless an endpoint is configured and answers). The output
follows the article's ``実行結果`` line by line; ``--pause`` replaces its 10-second wait.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ..client.provider import RemoteChatHistoryProvider, show_provider_calls
from ..vocabulary import SERVICE_URL_VARIABLE
from .agent import create_agent
from .display import (
    create_or_resume_session,
    print_agent_response,
    print_external_store,
    print_session_id,
    print_state_bag,
)
from .llm import LLMConnection, connect_llm

__all__ = ["ARTICLE_PROMPTS", "run_article_scenario", "run_demo"]

ARTICLE_PROMPTS = (
    "現在時刻を教えてください",
    "もう一度現在時刻を取得してください",
    "最初の時刻からどれくらい経過していますか?",
)


async def run_article_scenario(agent: Any, provider: RemoteChatHistoryProvider, pause: float) -> list[str]:
    """The article's Program.cs after the agent is built; returns the two sessions' keys."""
    first, again, elapsed = ARTICLE_PROMPTS
    session1 = await create_or_resume_session(agent, provider, None)
    session2 = agent.create_session()
    await print_external_store(provider)

    print_agent_response(await agent.run(first, session=session1))
    print_session_id("Session1", provider, session1)
    await print_external_store(provider)

    await asyncio.sleep(pause)  # the article waits 10 s
    print_agent_response(await agent.run(again, session=session1))
    await print_external_store(provider)

    print_agent_response(await agent.run(elapsed, session=session1))
    await print_external_store(provider)

    print_agent_response(await agent.run(first, session=session2))
    print_session_id("Session2", provider, session2)
    await print_external_store(provider)

    for name, session in (("Session1", session1), ("Session2", session2)):
        print(f"[{name}]")
        print_state_bag(session)
    return [provider.conversation_key(session1), provider.conversation_key(session2)]


async def run_demo(
    pause: float = 2.0, service_url: str | None = None, llm_mode: str | None = None, runs: int = 2
) -> None:
    """Run the scenario ``runs`` times against one service: each run's store lists the earlier runs' keys."""
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
    show_provider_calls()
    llm: LLMConnection | None = None
    try:
        llm = await connect_llm(llm_mode)
        for run in range(1, runs + 1):
            title = "1回目の実行" if run == 1 else f"チャット履歴管理サーバーを保持したまま{run}回目の実行"
            print(f"\n===== {title} (run {run}: a new provider and agent, the same service) =====")
            async with RemoteChatHistoryProvider(url) as provider:
                await run_article_scenario(create_agent(llm.client, provider), provider, pause)
    finally:
        show_provider_calls(False)
        if llm is not None:
            await llm.aclose()
        if service is not None:
            await asyncio.to_thread(service.stop)
