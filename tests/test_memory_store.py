"""The in-memory store is safe to share between threads, each with its own event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatlab.stores import ConversationSummary, InMemoryChatHistoryStore


def test_threads_appending_deleting_and_replacing_never_split_a_batch() -> None:
    store = InMemoryChatHistoryStore()
    batch = [f"{i}".encode() for i in range(10)]

    def writer() -> None:
        async def run() -> None:
            for _ in range(300):
                await store.append("k", batch)

        asyncio.run(run())

    def disturber() -> None:
        async def run() -> None:
            for i in range(100):
                await (store.delete("k") if i % 2 else store.replace("k", batch))

        asyncio.run(run())

    threads = [threading.Thread(target=writer) for _ in range(4)] + [threading.Thread(target=disturber)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    messages = asyncio.run(store.get("k"))
    assert len(messages) % 10 == 0
    assert messages == batch * (len(messages) // 10)
    assert asyncio.run(store.summaries()) in ([], [ConversationSummary("k", len(messages))])


@pytest.mark.parametrize(
    ("current", "appended"),
    [
        ("5f0c.4", "5f0c.9"),
        ("5f0c.007", "5f0c.9"),
        ("a.b.3", "a.b.9"),
        ("legacy", "legacy.9"),
        (".4", ".4.9"),
        ("g.x", "g.x.9"),
        ("g.", "g..9"),
    ],
)
def test_an_append_keeps_the_generation(current: str, appended: str) -> None:
    """The generation is what comes before a trailing ``.<digits>``; otherwise the whole version (one written before
    versions had a count, see ``Version.parse``)."""
    from chatlab.stores.base import appended_version

    assert appended_version(current, 9) == appended
