"""Batches appended at the same time to one conversation stay whole and in order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import groupby

import httpx

from chatlab.runner import BackgroundServer
from tests.summaries import article

THREADS, BATCHES, BATCH_SIZE = 8, 20, 5
KEY = "shared-conversation"


def _batch(thread: int, batch: int) -> dict:
    return {
        "messages": [
            {"role": "user", "contents": [{"$type": "text", "text": f"{thread}/{batch}/{i}"}]}
            for i in range(BATCH_SIZE)
        ]
    }


def _append_all(url: str, thread: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for batch in range(BATCHES):
            client.post(f"/chat-history/{KEY}", json=_batch(thread, batch)).raise_for_status()


def test_concurrent_batches_are_contiguous_and_ordered(service: BackgroundServer, http: httpx.Client) -> None:
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda t: _append_all(service.url, t), range(THREADS)))

    labels = [m["contents"][0]["text"].split("/") for m in http.get(f"/chat-history/{KEY}").json()]
    assert len(labels) == THREADS * BATCHES * BATCH_SIZE
    assert article(http.get("/chat-history").json()) == [{"conversationKey": KEY, "messageCount": len(labels)}]

    runs = [list(run) for _, run in groupby(labels, key=lambda label: (label[0], label[1]))]
    assert len(runs) == THREADS * BATCHES, "a batch was split by another request's messages"
    for run in runs:
        assert [label[2] for label in run] == [str(i) for i in range(BATCH_SIZE)]
    for thread in range(THREADS):  # each client's batches in the order it sent them
        mine = [int(run[0][1]) for run in runs if run[0][0] == str(thread)]
        assert mine == list(range(BATCHES))
