"""Notebook 2 writes the article's provider to ``notebooks/remote_provider.py``; notebooks 3 and 4 import it.

The committed file must be what notebook 2's ``%%writefile`` cells write (a clean clone can run notebook 3 first),
and the learner's class and chatlab's must agree on the article's run.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
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
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "02_remote_chat_history_provider.ipynb"
MODULE = NOTEBOOKS / "remote_provider.py"
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS
RUNS = [(0, FIRST), (0, AGAIN), (0, ELAPSED), (1, FIRST)]  # (session, prompt): the article's order, no wait


def written_by_the_notebook() -> str:
    """What notebook 2's ``%%writefile`` cells leave in the file, run in order (IPython ends a body with a newline)."""
    text = ""
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        first, _, body = cell.source.partition("\n")
        if cell.cell_type == "code" and first.startswith("%%writefile"):
            assert first.split()[-1] == MODULE.name, f"{first!r} writes another file than {MODULE.name}"
            text = (text if "-a" in first.split() else "") + body + "\n"
    return text


def learner_module() -> ModuleType:
    """``notebooks/remote_provider.py``, imported as the notebooks import it."""
    spec = importlib.util.spec_from_file_location("remote_provider", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_module_is_what_notebook_2_writes() -> None:
    assert MODULE.read_text(encoding="utf-8") == written_by_the_notebook(), (
        f"{MODULE.name} differs from notebook 2's %%writefile cells: run notebook 2 and commit the file"
    )


def test_notebook_2_builds_the_class_in_the_articles_four_parts() -> None:
    parts = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.source.startswith("%%writefile")]
    assert len(parts) == 4
    hooks = ("def __init__", "def get_messages", "def after_run", "def attach_to_session")
    for part, hook in zip(parts, hooks, strict=True):
        assert hook in part.source


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


async def test_the_learners_provider_and_chatlabs_agree_on_the_article_run(
    service: BackgroundServer, llm: LLMConnection, capsys: pytest.CaptureFixture[str]
) -> None:
    learners_class = learner_module().RemoteChatHistoryProvider
    assert issubclass(learners_class, HistoryProvider)
    learners_provider: Any = learners_class(service.url)  # the notebook's class: not typed
    try:
        theirs = await article_run(learners_provider, llm)
    finally:
        await learners_provider.aclose()
    async with RemoteChatHistoryProvider(service.url) as provider:
        ours = await article_run(provider, llm)

    assert theirs[0] == ours[0] == [4, 8, 10, 4]
    assert theirs[1] == ours[1] == [{"RemoteChatHistoryProvider": {"externalConversationKey": "<key>"}}] * 2
    assert theirs[2] == ours[2]
    # the learner's provider prints the article's Console.WriteLine lines
    out = capsys.readouterr().out
    assert out.count("[ProvideChatHistoryAsync]") == 4 and out.count("[StoreChatHistoryAsync]") == 4
