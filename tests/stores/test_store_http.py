"""The service's contract over real HTTP, with each store behind it (memory, SQLite, PostgreSQL, Redis)."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from store_helpers import batch, check_batches, run_writers

from chatlab.runner import BackgroundServer
from chatlab.service import create_app, start_service
from chatlab.stores import ChatHistoryStore, open_store
from tests.missing import require_module
from tests.summaries import article

# The reference's content types, with nulls, nesting, non-ASCII and escapes.
MESSAGES = [
    {"role": "system", "contents": [{"$type": "text", "text": "You are helpful."}]},
    {
        "role": "user",
        "contents": [{"$type": "text", "text": '今の日時は？ é 😀 "quoted" \\ \u0001'}],
        "authorName": None,
    },
    {
        "role": "assistant",
        "contents": [
            {"$type": "reasoning", "text": "need the tool"},
            {
                "$type": "functionCall",
                "callId": "call_1",
                "name": "GetDateTime",
                "arguments": {"tz": None, "n": [1, 2.5]},
            },
        ],
        "messageId": "m-3",
    },
    {
        "role": "tool",
        "contents": [
            {"$type": "functionResult", "callId": "call_1", "result": {"now": "2026-04-16T01:30:52", "x": {}}}
        ],
    },
    {
        "role": "assistant",
        "contents": [{"$type": "text", "text": "現在の日時は **2026-04-16 01:30:52** です。"}],
        "additionalProperties": {"k": [True, False, None]},
    },
]


def _transcript(client: httpx.Client) -> list[tuple[int, bytes]]:
    """A fixed sequence of requests; what each answered (status and body bytes)."""
    out = []

    def do(method: str, path: str, body: object = None) -> None:
        response = client.request(method, path, json=body) if body is not None else client.request(method, path)
        # the times of writes differ between two runs; each must still be an ISO 8601 UTC time
        body = re.sub(
            rb'"(createdAt|updatedAt)":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"', rb'"\1":"<time>"', response.content
        )
        out.append((response.status_code, body))

    do("GET", "/chat-history/conv-a")
    do("POST", "/chat-history/conv-a", {"messages": MESSAGES[:2]})
    do("POST", "/chat-history/conv-a", {"messages": MESSAGES[2:]})
    do("GET", "/chat-history/conv-a")
    do("PUT", "/chat-history/Conv_B", {"messages": MESSAGES[3:]})
    do("PUT", "/chat-history/0-empty", {"messages": []})
    do("GET", "/chat-history")
    do("DELETE", "/chat-history/conv-a")
    do("DELETE", "/chat-history/conv-a")
    do("GET", "/chat-history/conv-a")
    do("GET", "/chat-history")
    return out


@pytest.fixture(scope="module")
def reference_transcript() -> list[tuple[int, bytes]]:
    """What the service answers with the article's in-memory store (a server of its own)."""
    with (
        BackgroundServer(create_app("memory://"), name="reference-service") as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        return _transcript(client)


def test_answers_byte_for_byte_as_the_in_memory_store(http: httpx.Client, reference_transcript):
    got = _transcript(http)
    assert got == reference_transcript
    # and the in-memory store answers with the messages as posted, in order
    assert json.loads(got[3][1]) == MESSAGES
    assert article(json.loads(got[6][1].replace(b"<time>", b"2026-01-01T00:00:00.000Z"))) == [
        {"conversationKey": "0-empty", "messageCount": 0},
        {"conversationKey": "Conv_B", "messageCount": 2},
        {"conversationKey": "conv-a", "messageCount": 5},
    ]
    assert [status for status, _ in got] == [200, 202, 202, 200, 204, 204, 200, 204, 204, 200, 200]


def test_service_describes_its_store(http: httpx.Client, backend: str):
    description = http.get("/").json()["description"]
    names = {"memory": "memory", "sqlite": "SQLite", "postgres": "PostgreSQL", "redis": "Redis"}
    assert names[backend.removesuffix("-cluster")] in description


def _encoded(messages: list) -> list[bytes]:
    return [json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode() for m in messages]


def test_location_and_order(http: httpx.Client):
    for n in range(5):
        response = http.post("/chat-history/ordered", json={"messages": [json.loads(m) for m in batch(0, n, 2)]})
        assert response.status_code == 202
        assert response.headers["location"] == "/chat-history/ordered"
    check_batches(_encoded(http.get("/chat-history/ordered").json()), {(0, n): 2 for n in range(5)})


def test_concurrent_batches_stay_whole_and_contiguous(service: BackgroundServer):
    writers, batches = 6, 10

    def writer(w: int) -> None:
        with httpx.Client(base_url=service.url, timeout=30) as client:
            for b in range(batches):
                body = {"messages": [json.loads(m) for m in batch(w, b, (w + b) % 4 + 1)]}
                assert client.post("/chat-history/busy", json=body).status_code == 202

    run_writers(writer, writers)
    with httpx.Client(base_url=service.url, timeout=30) as client:
        messages = client.get("/chat-history/busy").json()
        summary = client.get("/chat-history").json()
    check_batches(_encoded(messages), {(w, b): (w + b) % 4 + 1 for w in range(writers) for b in range(batches)})
    assert article(summary) == [{"conversationKey": "busy", "messageCount": len(messages)}]


def test_refused_request_changes_nothing(http: httpx.Client):
    http.post("/chat-history/k", json={"messages": MESSAGES[:1]})
    bad = {"messages": [MESSAGES[1], {"role": "user", "contents": [{"$type": "nosuch"}]}]}
    assert http.post("/chat-history/k", json=bad).status_code == 400
    assert http.put("/chat-history/k", json=bad).status_code == 400
    assert http.get("/chat-history/k").json() == MESSAGES[:1]


# -- a store that is down answers 503 with a JSON problem ---------------------------------


def _unreachable(backend: str, port: int, tmp_path) -> ChatHistoryStore:
    if backend == "postgres":
        require_module("psycopg", "postgres")
        return open_store(f"postgresql://postgres@127.0.0.1:{port}/test", timeout=1.0)
    if backend == "redis":
        require_module("redis", "redis")
        return open_store(f"redis://127.0.0.1:{port}/0", timeout=1.0)
    return open_store(str(tmp_path / "missing-dir" / "history.db"))


@pytest.mark.parametrize("down", ["postgres", "redis", "sqlite"])
def test_unreachable_store_answers_503_json(down: str, closed_port: int, tmp_path):
    store = _unreachable(down, closed_port, tmp_path)
    server = start_service(store=store)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.get("/").status_code == 200  # the service itself is up
            for method, path, body in [
                ("GET", "/chat-history", None),
                ("GET", "/chat-history/k", None),
                ("POST", "/chat-history/k", {"messages": MESSAGES[:1]}),
                ("PUT", "/chat-history/k", {"messages": MESSAGES[:1]}),
                ("DELETE", "/chat-history/k", None),
            ]:
                response = client.request(method, path, json=body)
                assert response.status_code == 503, (method, path, response.text)
                assert response.headers["content-type"].startswith("application/problem+json")
                problem = response.json()
                assert problem["status"] == 503
                assert "history store failed" in problem["detail"]
                if down != "sqlite":
                    assert f"127.0.0.1:{closed_port}" in problem["detail"]
    finally:
        asyncio.run(store.close())  # reaches the server's loop while it still runs
        server.stop()
