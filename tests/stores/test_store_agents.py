"""Several agents on one conversation, on every store: workflows store each turn once with its author, and agents in
separate processes writing concurrently lose and double nothing.

Real processes (``tests/agent_process.py``), each a different agent on the offline model, write concurrently to one
key of a real service; the stored transcript holds every run's question and answer once, together, with its author.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from agent_framework_orchestrations import ConcurrentBuilder, SequentialBuilder

from chatlab.client.http import AsyncChatHistoryClient
from chatlab.runner import BackgroundServer
from chatlab.tutorial.llm import LLMConnection
from chatlab.tutorial.team import PLANNER_NAME, WORKER_NAME
from tests.test_agents import _turns, run_workflow, stored

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent.parent
TURNS = 6
KEY = "agents-in-processes"


async def run_agent(url: str, part: str) -> str:
    """Run one agent process to its end: what it printed (it fails the test if the process fails)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.agent_process", url, KEY, part, str(TURNS),
        cwd=ROOT, env={**os.environ, "CHATLAB_LLM": "offline"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


async def test_two_agent_processes_on_one_key_lose_and_double_nothing(service: BackgroundServer) -> None:
    printed = await asyncio.gather(run_agent(service.url, "planner"), run_agent(service.url, "worker"))
    assert printed == [f"planner: {TURNS} runs", f"worker: {TURNS} runs"]
    async with AsyncChatHistoryClient(service.url) as client:
        messages = (await client.read(KEY)).messages
    assert len(messages) == 2 * 2 * TURNS
    texts = [" ".join(c.get("text", "") for c in m["contents"]) for m in messages]
    for part, author in (("planner", PLANNER_NAME), ("worker", WORKER_NAME)):
        for turn in range(TURNS):
            question = f"{part} question {turn}?"
            assert texts.count(question) == 1, f"{question!r} stored {texts.count(question)} times"
            answer = messages[texts.index(question) + 1]  # each run's batch stays together
            assert (answer["role"], answer.get("authorName")) == ("assistant", author)


async def test_a_sequential_workflow_and_a_fan_out_store_each_turn_once(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    await run_workflow(service, llm, lambda p, w: SequentialBuilder(participants=[p, w]).build(), ["A?"])
    await run_workflow(service, llm, lambda p, w: ConcurrentBuilder(participants=[p, w]).build(), ["B?"])
    transcript = await stored(service)
    assert transcript[:3] == _turns("A?", 1)
    assert sorted(transcript[3:]) == sorted(
        [
            ("user", None, "B?"),
            ("assistant", PLANNER_NAME, 'Plan for "B?" (plan 2): 1. look it up 2. answer in one line'),
            ("assistant", WORKER_NAME, 'Done: "B?", following the plan Planner gave me.'),
        ]
    )
