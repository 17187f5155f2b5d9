"""A page costs the same whatever else the store holds: a service without API keys skips the namespaced
conversations of the store a namespace at a time, so each page of its listing takes a few store calls, however many
namespaced conversations lie between its own (real HTTP to a real service over each store)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from chatlab.service import ServiceSettings, start_service
from chatlab.stores import ChatHistoryStore, InMemoryChatHistoryStore, open_store
from chatlab.stores.base import ConversationRecord, new_version

NAMESPACED = 3000  # in three namespaces, sorted between the keyless conversations
OWN = ["a1", "b1", "m1", "n1", "y1", "z9"]  # "b1" sorts after "alice/...", "n1" after "mallory/..."
MESSAGE = b'{"role":"user","contents":[]}'


def _fill(store: ChatHistoryStore) -> None:
    namespaces = ["alice", "mallory", "yann"]
    keys = [f"{namespaces[i % 3]}/c{i:05d}" for i in range(NAMESPACED)] + OWN
    records = [ConversationRecord(key, [MESSAGE], new_version(1), 1.7e9, 1.7e9) for key in keys]

    async def restore() -> None:
        for start in range(0, len(records), 500):
            await store.restore(records[start : start + 500])

    asyncio.run(restore())


class _Counted:
    """Counts the calls of a store's ``summaries`` (the real method runs)."""

    def __init__(self, store: ChatHistoryStore) -> None:
        self.calls = 0
        listing = store.summaries

        async def summaries(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await listing(*args, **kwargs)

        store.summaries = summaries  # type: ignore[method-assign]


def test_a_keyless_page_takes_a_few_store_calls_past_thousands_of_namespaced_conversations(store_url: str) -> None:
    store = InMemoryChatHistoryStore() if store_url == "memory://" else open_store(store_url)
    _fill(store)
    counted = _Counted(store)
    service = start_service(store=store, settings=ServiceSettings(api_keys=None))
    try:
        listed: list[str] = []
        calls: list[int] = []
        url: str | None = f"{service.url}/chat-history?limit=1"
        while url is not None:
            before = counted.calls
            response = httpx.get(url, timeout=30)
            assert response.status_code == 200, response.text
            listed += [item["conversationKey"] for item in response.json()]
            calls.append(counted.calls - before)
            following = response.links.get("next", {}).get("url")
            url = None if following is None else f"{service.url}{following}"
        assert listed == OWN  # every keyless conversation, once, in order; no namespaced one
        assert max(calls) <= 3, calls  # a namespace passed costs one call, its conversations none
        whole = httpx.get(f"{service.url}/chat-history?limit=100", timeout=30)
        assert [item["conversationKey"] for item in whole.json()] == OWN
    finally:
        service.stop()
        if not isinstance(store, InMemoryChatHistoryStore):
            asyncio.run(store.close())
