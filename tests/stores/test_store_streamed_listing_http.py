"""A listing without ``limit`` (the article's ``GET /chat-history``) is sent as the store is read, a piece of
conversations at a time: its bytes are those of one page holding them all, across the pieces' boundaries, with no
namespaced conversation on a keyless service (real HTTP to a real service over each store)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service
from chatlab.service.parameters import MAX_PAGE
from chatlab.service.routes import LISTING_PIECE
from chatlab.stores import ChatHistoryStore, InMemoryChatHistoryStore, open_store
from chatlab.stores.base import ConversationRecord, new_version

OWN = 2 * LISTING_PIECE + 1  # the service's own conversations: three pieces, the last of one
MESSAGE = b'{"role":"user","contents":[]}'


def own_key(i: int) -> str:
    return f"k{i:05d}"


def _records() -> list[ConversationRecord]:
    """The own conversations, some titled and two in three tagged; after each, one in a namespace named after it
    (``k00007/hidden`` sorts between ``k00007`` and ``k00008``), which a keyless service never lists."""
    records = []
    for i in range(OWN):
        title = f"title {i}" if i % 5 == 0 else None
        tags = {"t": "x"} if i % 3 else {}
        count = i % 4
        records.append(
            ConversationRecord(
                own_key(i), [MESSAGE] * count, new_version(count), 1.7e9, 1.7e9 + i, title=title, tags=tags
            )
        )
        records.append(ConversationRecord(f"{own_key(i)}/hidden", [MESSAGE], new_version(1), 1.7e9, 1.7e9))
    return records


def _restore(store: ChatHistoryStore, records: list[ConversationRecord]) -> None:
    async def restore() -> None:
        for start in range(0, len(records), 500):
            await store.restore(records[start : start + 500])

    asyncio.run(restore())


def _serve(store_url: str, records: list[ConversationRecord]) -> Iterator[BackgroundServer]:
    store = InMemoryChatHistoryStore() if store_url == "memory://" else open_store(store_url)
    _restore(store, records)
    service = start_service(store=store, settings=ServiceSettings(api_keys=None))
    try:
        yield service
    finally:
        service.stop()
        if not isinstance(store, InMemoryChatHistoryStore):
            asyncio.run(store.close())


@pytest.fixture
def filled(store_url: str) -> Iterator[BackgroundServer]:
    """A keyless service over a store of :data:`OWN` conversations and as many namespaced ones."""
    yield from _serve(store_url, _records())


@pytest.fixture
def empty(store_url: str) -> Iterator[BackgroundServer]:
    yield from _serve(store_url, [])


def _whole_and_page(service: BackgroundServer, query: str) -> tuple[httpx.Response, httpx.Response]:
    """The listing without ``limit``, and the one page of at most :data:`MAX_PAGE` with the same ``query``."""
    whole = httpx.get(f"{service.url}/chat-history{query}", timeout=60)
    separator = "&" if query else "?"
    page = httpx.get(f"{service.url}/chat-history{query}{separator}limit={MAX_PAGE}", timeout=60)
    assert whole.status_code == page.status_code == 200, whole.text
    assert "link" not in page.headers  # everything fits on the one page it is compared with
    return whole, page


def test_the_whole_listing_is_the_one_page_of_everything_across_the_pieces(filled: BackgroundServer) -> None:
    whole, page = _whole_and_page(filled, "")
    assert whole.content == page.content
    listed = whole.json()
    assert [row["conversationKey"] for row in listed] == [own_key(i) for i in range(OWN)]  # no k00007/hidden
    assert [row["messageCount"] for row in listed] == [i % 4 for i in range(OWN)]
    assert listed[5]["title"] == "title 5" and listed[5]["tags"] == {"t": "x"} and "tags" not in listed[3]
    # sent as it is read: chunked, with no length known beforehand
    assert whole.headers["content-type"] == "application/json"
    assert whole.headers.get("transfer-encoding") == "chunked" and "content-length" not in whole.headers


@pytest.mark.parametrize("left", [LISTING_PIECE - 1, LISTING_PIECE, LISTING_PIECE + 1, 1])
def test_a_listing_after_a_key_ends_at_any_point_of_a_piece(filled: BackgroundServer, left: int) -> None:
    whole, page = _whole_and_page(filled, f"?after={own_key(OWN - left - 1)}")
    assert whole.content == page.content
    assert [row["conversationKey"] for row in whole.json()] == [own_key(i) for i in range(OWN - left, OWN)]


def test_a_listing_by_tag_without_limit_is_streamed_too(filled: BackgroundServer) -> None:
    whole, page = _whole_and_page(filled, "?tag=t:x")
    assert whole.content == page.content
    assert [row["conversationKey"] for row in whole.json()] == [own_key(i) for i in range(OWN) if i % 3]


def test_the_whole_listing_of_an_empty_store_is_an_empty_list(empty: BackgroundServer) -> None:
    response = httpx.get(f"{empty.url}/chat-history", timeout=30)
    assert response.status_code == 200 and response.content == b"[]"
    after = httpx.get(f"{empty.url}/chat-history?after=k", timeout=30)
    assert after.status_code == 200 and after.content == b"[]"
