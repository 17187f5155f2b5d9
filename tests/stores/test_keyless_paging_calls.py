"""A page costs the same whatever else the store holds: a service without API keys lists only the keys outside every
namespace, which each store reads from an index of their own, so each page of its listing is one store call, however
many namespaced conversations lie between its own (real HTTP to a real service over each store; the calls counted by
a :class:`~chatlab.service.wrapped_store.WrappedStore` around it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service
from chatlab.service.wrapped_store import WrappedStore
from chatlab.stores import ChatHistoryStore, InMemoryChatHistoryStore, open_store
from chatlab.stores.base import ConversationRecord, new_version

NAMESPACES = ["alice", "mallory", "yann"]
PER_GROUP = 250  # namespaced conversations right after each own one: 12 groups, 3,000 in all
OWN = ["a1", "b1", "m1", "n1", "y1", "z9", "z9-", "zz", "zz0", "zz1", "zz2", "zz3"]
BLUE = {"a1", "n1", "z9-", "zz2"}  # the own conversations tagged team=blue (every namespaced one is tagged too)
MESSAGE = b'{"role":"user","contents":[]}'


def _namespaced() -> list[str]:
    """Keys in other namespaces that sort between the own ones: ``a1/...`` right after ``a1``, ``alice/...`` before
    ``b1``, ``mallory/...`` before ``n1``, ``yann/...`` before ``z9`` (a key's first segment is its namespace)."""
    keys = [f"{own}/c{n:04d}" for own in OWN for n in range(PER_GROUP // 2)]
    keys += [f"{NAMESPACES[n % 3]}/c{n:04d}" for n in range(len(OWN) * PER_GROUP // 2)]
    return keys


def _fill(store: ChatHistoryStore) -> None:
    def record(key: str, tagged: bool) -> ConversationRecord:
        tags = {"team": "blue"} if tagged else {}
        return ConversationRecord(key, [MESSAGE], new_version(1), 1.7e9, 1.7e9, tags=tags)

    records = [record(key, key in BLUE) for key in OWN] + [record(key, True) for key in _namespaced()]

    async def restore() -> None:
        for start in range(0, len(records), 500):
            await store.restore(records[start : start + 500])

    asyncio.run(restore())


class CountedStore(WrappedStore):
    """The store, with its ``summaries`` calls counted."""

    def __init__(self, inner: ChatHistoryStore) -> None:
        super().__init__(inner)
        self.listings = 0

    async def around(self, operation: str, call: Awaitable[Any]) -> Any:
        """Count a listing, then await it."""
        if operation == "summaries":
            self.listings += 1
        return await call


@pytest.fixture
def crowded(store_url: str) -> Iterator[tuple[BackgroundServer, CountedStore]]:
    """A keyless service over a store holding :data:`OWN` and 3,000 namespaced conversations between them."""
    inner = InMemoryChatHistoryStore() if store_url == "memory://" else open_store(store_url)
    _fill(inner)
    store = CountedStore(inner)
    service = start_service(store=store, settings=ServiceSettings(api_keys=None))
    try:
        yield service, store
    finally:
        service.stop()
        if not isinstance(inner, InMemoryChatHistoryStore):
            asyncio.run(inner.close())


def _walk(service: BackgroundServer, store: CountedStore, query: list[tuple[str, str]]) -> list[list[str]]:
    """Every page of the listing ``query`` asks for, following its ``Link``s; each page is checked to take one store
    call and to link to the page after its last key (the last page links nowhere)."""
    pages: list[list[str]] = []
    url: str | None = f"{service.url}/chat-history?{urlencode(query)}"
    while url is not None:
        before = store.listings
        response = httpx.get(url, timeout=60)
        assert response.status_code == 200, response.text
        assert store.listings - before == 1  # one store call, whatever lies between the pages
        pages.append([item["conversationKey"] for item in response.json()])
        following = response.links.get("next", {}).get("url")
        if following is not None:
            limit = [item for item in query if item[0] == "limit"]
            tags = [item for item in query if item[0] == "tag"]
            assert following == f"/chat-history?{urlencode([*limit, ('after', pages[-1][-1]), *tags])}"
        url = None if following is None else f"{service.url}{following}"
    return pages


def test_each_keyless_page_is_one_store_call_beside_thousands_of_namespaced_conversations(
    crowded: tuple[BackgroundServer, CountedStore],
) -> None:
    service, store = crowded
    assert _walk(service, store, [("limit", "1")]) == [[key] for key in OWN]  # every own one, once, in order
    assert _walk(service, store, [("limit", "5")]) == [OWN[0:5], OWN[5:10], OWN[10:]]
    assert _walk(service, store, [("limit", "100")]) == [OWN]
    after_m1 = [["n1", "y1"], ["z9", "z9-"], ["zz", "zz0"], ["zz1", "zz2"], ["zz3"]]
    assert _walk(service, store, [("limit", "2"), ("after", "m1")]) == after_m1


def test_each_keyless_page_of_a_tag_is_one_store_call(crowded: tuple[BackgroundServer, CountedStore]) -> None:
    service, store = crowded
    blue = [key for key in OWN if key in BLUE]
    assert _walk(service, store, [("limit", "1"), ("tag", "team:blue")]) == [[key] for key in blue]
    assert _walk(service, store, [("limit", "3"), ("tag", "team:blue")]) == [blue[:3], blue[3:]]


def test_the_keyless_unpaged_listing_is_one_store_call(crowded: tuple[BackgroundServer, CountedStore]) -> None:
    service, store = crowded
    before = store.listings
    response = httpx.get(f"{service.url}/chat-history", timeout=60)
    assert response.status_code == 200, response.text
    assert [item["conversationKey"] for item in response.json()] == OWN
    assert store.listings - before == 1
