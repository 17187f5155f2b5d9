"""Batches appended at the same time to one conversation stay whole and in order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import groupby

from chatlab.client import ChatHistoryClient
from chatlab.runner import BackgroundServer
from chatlab.vocabulary import ConversationSummary

THREADS, BATCHES, BATCH_SIZE = 8, 20, 5
KEY = "shared-conversation"


def _batch(thread: int, batch: int) -> list[dict]:
    return [
        {"role": "user", "contents": [{"$type": "text", "text": f"{thread}/{batch}/{i}"}]} for i in range(BATCH_SIZE)
    ]


def _append_all(url: str, thread: int) -> None:
    with ChatHistoryClient(url, timeout=30, retry=None) as client:
        for batch in range(BATCHES):
            client.append(KEY, _batch(thread, batch))


def test_concurrent_batches_are_contiguous_and_ordered(service: BackgroundServer) -> None:
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda t: _append_all(service.url, t), range(THREADS)))

    with ChatHistoryClient(service.url) as client:
        labels = [m["contents"][0]["text"].split("/") for m in client.read(KEY).messages]
        assert len(labels) == THREADS * BATCHES * BATCH_SIZE
        assert client.summaries() == [ConversationSummary(KEY, len(labels))]

    runs = [list(run) for _, run in groupby(labels, key=lambda label: (label[0], label[1]))]
    assert len(runs) == THREADS * BATCHES, "a batch was split by another request's messages"
    for run in runs:
        assert [label[2] for label in run] == [str(i) for i in range(BATCH_SIZE)]
    for thread in range(THREADS):  # each client's batches in the order it sent them
        mine = [int(run[0][1]) for run in runs if run[0][0] == str(thread)]
        assert mine == list(range(BATCHES))
