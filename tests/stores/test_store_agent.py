"""The article's swap: the same provider and agent against a persistent store; the service restarts; the
conversation is still there (the offline model, real HTTP)."""

from __future__ import annotations

import pytest

from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.runner import BackgroundServer
from chatlab.service import create_app
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection

pytestmark = pytest.mark.anyio
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS


async def _session_in_a_fresh_service(store_url: str, llm: LLMConnection, key: str | None, prompt: str):
    """Start a service on the store, run one prompt in the session ``key`` (a new one if None), stop it."""
    with BackgroundServer(create_app(store_url), name="restarted-service") as service:
        async with RemoteChatHistoryProvider(service.url) as provider:
            agent = create_agent(llm.client, provider)
            session = agent.create_session()
            if key is not None:
                provider.attach_to_session(session, key)
            before = await provider.get_stored_message_count(provider.conversation_key(session))
            answer = (await agent.run(prompt, session=session)).text
            after = await provider.get_stored_message_count(provider.conversation_key(session))
            return provider.conversation_key(session), before, after, answer


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis", "memory"])
async def test_the_conversation_outlives_a_restart_of_the_service(backend: str, store_url: str, llm) -> None:
    key, before, after, _ = await _session_in_a_fresh_service(store_url, llm, None, FIRST)
    assert (before, after) == (0, 4)
    _, before, after, _ = await _session_in_a_fresh_service(store_url, llm, key, AGAIN)
    if backend == "memory":
        assert (before, after) == (0, 4)  # the article's store forgets with its process
        return
    assert (before, after) == (4, 8)
    _, before, after, answer = await _session_in_a_fresh_service(store_url, llm, key, ELAPSED)
    assert (before, after) == (8, 10)
    # the model computed the time between the two results it found in the restored history
    assert answer.startswith("最初に取得した時刻（") and "が経過しています" in answer, answer
