"""The benchmark's stall jobs: the worst body fills the default limit, the list counts what it read."""

from __future__ import annotations

import asyncio

import httpx

from benchmarks.servers import filled_store
from benchmarks.stall import MAX_BODY_BYTES, Latencies, list_conversations, under, worst_body
from chatlab.runner import BackgroundServer
from chatlab.service import create_app


def test_the_worst_body_fills_the_default_limit() -> None:
    body, items = worst_body()
    assert MAX_BODY_BYTES - 17 < len(body) <= MAX_BODY_BYTES
    assert body.count(b'{"$type":"text"}') == items > 490_000


def test_latencies_read_percentiles_in_milliseconds() -> None:
    p50, p99, top = Latencies([0.001] * 98 + [0.002, 0.5]).ms()
    assert (p50, p99, top) == (1.0, 2.0, 500.0)


def test_the_list_job_reads_every_conversation_while_get_is_probed() -> None:
    store = asyncio.run(filled_store(30))
    assert len(asyncio.run(store.summaries())) == 30
    with BackgroundServer(create_app(store), name="listing").start() as server:
        with httpx.Client(base_url=server.url) as client:
            listed = client.get("/chat-history")
            assert listed.status_code == 200 and listed.content.count(b"user-00000") == 30
        alone, _, took, size = under(server.url, list_conversations, 2, 5)
    assert len(alone.seconds) == 5 and len(took) == 2 and size == len(listed.content)
