"""Notebook 2 writes the article's provider in its cells; it and chatlab's must agree on the article's run.

The class is taken from the notebook itself (its cells tagged ``article-provider``), so the test
holds the version a reader reads, not a copy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from agent_framework import HistoryProvider

from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.runner import BackgroundServer
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection

pytestmark = pytest.mark.anyio
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_remote_chat_history_provider.ipynb"
TAG = "article-provider"
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS
RUNS = [(0, FIRST), (0, AGAIN), (0, ELAPSED), (1, FIRST)]  # (session, prompt): the article's order, no wait


def notebook_provider_class() -> type[HistoryProvider]:
    """``RemoteChatHistoryProvider`` as defined by the notebook's tagged cells, executed in a fresh namespace."""
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if TAG in c.metadata.get("tags", [])]
    assert cells, f"{NOTEBOOK.name} has no cell tagged {TAG!r}"
    namespace: dict[str, Any] = {}
    for cell in cells:
        exec(compile(cell.source, f"{NOTEBOOK.name} [{TAG}]", "exec"), namespace)
    cls: type[HistoryProvider] = namespace["RemoteChatHistoryProvider"]
    assert issubclass(cls, HistoryProvider)
    return cls


def state_shape(value: Any) -> Any:
    """The session state with each conversation key (32 hex digits) replaced by ``<key>``."""
    if isinstance(value, dict):
        return {k: state_shape(v) for k, v in value.items()}
    return "<key>" if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value) else value


async def article_run(provider: Any, llm: LLMConnection) -> tuple[list[int], list[Any], list[str]]:
    """The session's stored count after each run, each session's state shape, and the stored roles of session 1."""
    agent = create_agent(llm.client, provider)
    sessions = [agent.create_session(), agent.create_session()]
    counts = []
    for index, prompt in RUNS:
        await agent.run(prompt, session=sessions[index])
        key = provider.try_get_external_conversation_key(sessions[index])
        stored = {s.conversation_key: s.message_count for s in await provider.get_conversation_summaries()}
        counts.append(stored[key])
        assert sessions[index].state[provider.source_id] == {"externalConversationKey": key}
    roles = [str(m.role) for m in await provider.get_messages(sessions[0])]
    return counts, [state_shape(s.to_dict()["state"]) for s in sessions], roles


async def test_the_notebook_provider_and_chatlabs_agree_on_the_article_run(
    service: BackgroundServer, llm: LLMConnection, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook_provider: Any = notebook_provider_class()(service.url)  # the notebook's class: not typed
    try:
        theirs = await article_run(notebook_provider, llm)
    finally:
        await notebook_provider.aclose()
    async with RemoteChatHistoryProvider(service.url) as provider:
        ours = await article_run(provider, llm)

    assert theirs[0] == ours[0] == [4, 8, 10, 4]
    assert theirs[1] == ours[1] == [{"RemoteChatHistoryProvider": {"externalConversationKey": "<key>"}}] * 2
    assert theirs[2] == ours[2]
    # the notebook's provider prints the article's Console.WriteLine lines
    out = capsys.readouterr().out
    assert out.count("[ProvideChatHistoryAsync]") == 4 and out.count("[StoreChatHistoryAsync]") == 4
    assert "ResponseMessages Count: 3" in out and "First Message: user , [text]" in out


async def test_the_notebook_provider_reads_what_chatlabs_wrote(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        written = [m.to_dict() for m in await provider.get_messages(session)]
    notebook_provider: Any = notebook_provider_class()(service.url)  # the notebook's class: not typed
    try:
        assert notebook_provider.try_get_external_conversation_key(session) is not None
        read = [m.to_dict() for m in await notebook_provider.get_messages(session)]
    finally:
        await notebook_provider.aclose()
    assert read == written and len(read) == 4
