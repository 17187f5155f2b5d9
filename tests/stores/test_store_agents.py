"""Several agents on one conversation, on every store: workflows store each turn once with its author, and agents in
separate processes writing concurrently lose and double nothing.

Real processes (``tests/agent_process.py``), each a different agent on the offline model, write concurrently to one
key of a real service; the stored transcript holds every run's question and answer once, together, with its author.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agent_framework_orchestrations import ConcurrentBuilder, SequentialBuilder

from chatlab.client.http import AsyncChatHistoryClient, ChatHistoryClient
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


def _signed(text: str, author: str | None) -> dict[str, object]:
    message: dict[str, object] = {
        "role": "assistant" if author else "user",
        "contents": [{"$type": "text", "text": text}],
    }
    if author:
        message["authorName"] = author
    return message


PARTY = [_signed("q", None), _signed("p1", "Planner"), _signed("w1", "Worker"), _signed("p2", "Planner")]


def test_the_service_lists_the_participants_by_count(service: BackgroundServer) -> None:
    with httpx.Client(base_url=service.url) as http:
        assert http.post("/chat-history/party", json={"messages": PARTY}).status_code == 202
        answer = http.get("/chat-history/party/participants")
        assert answer.status_code == 200
        assert answer.json() == {
            "conversationKey": "party",
            "messageCount": 4,
            "participants": [{"authorName": "Planner", "messageCount": 2}, {"authorName": "Worker", "messageCount": 1}],
        }
        assert http.get("/chat-history/nobody/participants").json()["participants"] == []
        refused = http.get("/chat-history/party/participants?author=x")
        assert refused.status_code == 400 and "'author'" in refused.json()["detail"]


def test_a_read_filtered_by_author_is_paged_like_any_read(service: BackgroundServer) -> None:
    with ChatHistoryClient(service.url) as client:
        client.append("party", PARTY)
        assert client.participants("party") == {"Planner": 2, "Worker": 1}
        whole = client.read_by_author("party", "Planner")
        assert [m["contents"][0]["text"] for m in whole.messages] == ["p1", "p2"]
        first = client.read_by_author("party", "Planner", limit=1)
        assert ([m["contents"][0]["text"] for m in first.messages], first.next_after) == (["p1"], 1)
        rest = client.read_by_author("party", "Planner", after=first.next_after or 0, limit=1)
        assert ([m["contents"][0]["text"] for m in rest.messages], rest.next_after) == (["p2"], None)
        assert client.read_by_author("party", "Nobody").messages == []
    with httpx.Client(base_url=service.url) as http:
        for query in ("author=", "author=a&author=b", f"author={'x' * 300}"):
            answer = http.get(f"/chat-history/party?{query}")
            assert answer.status_code == 400, query
            assert "author" in answer.json()["detail"]
            assert http.head(f"/chat-history/party?{query}").status_code == 400, query
        get = http.get("/chat-history/party?author=Planner&limit=1")
        head = http.head("/chat-history/party?author=Planner&limit=1")
        assert (head.status_code, head.content) == (200, b"")
        assert [head.headers[name] for name in ("etag", "x-message-count", "link")] == [
            get.headers[name] for name in ("etag", "x-message-count", "link")
        ]


def test_the_export_keeps_each_messages_author(service: BackgroundServer, tmp_path: Path) -> None:
    with ChatHistoryClient(service.url) as client:
        client.append("party", PARTY)
    backup = tmp_path / "backup.jsonl"
    command = [sys.executable, "-m", "chatlab", "export", "--url", service.url, "-o", str(backup)]
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
    (line,) = [json.loads(text) for text in backup.read_text(encoding="utf-8").splitlines()]
    assert [m.get("authorName") for m in line["messages"]] == [None, "Planner", "Worker", "Planner"]
