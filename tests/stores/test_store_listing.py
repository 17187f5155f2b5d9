"""The store contract for listing and metadata, called directly, on every store: pages in key order, tag
filters, titles and tags set by a merge patch, kept by replace and restore, dropped by delete."""

from __future__ import annotations

import asyncio

import pytest
from store_helpers import batch

from chatlab.stores import ChatHistoryStore, open_store
from chatlab.stores.base import ConversationRecord
from chatlab.stores.metadata import MAX_TAGS, MetadataChange, MetadataError, TooManyTags
from chatlab.vocabulary import is_plain

KEYS = ["b", "B", "a-1", "a_1", "a", "Z9", "é", "z", "\ue000", "😀", "日本", "a.b", "~", "x/1", "x/2", "x/3"]


def run(coro):
    return asyncio.run(coro)


async def _use(url: str, work):
    store = open_store(url)
    try:
        return await work(store)
    finally:
        await store.close()


async def _pages(store: ChatHistoryStore, limit: int, **filters) -> list[list[str]]:
    """Every page of a listing, followed as a client follows ``Link: rel=next``."""
    pages: list[list[str]] = []
    after = None
    while True:
        page = await store.summaries(after=after, limit=limit + 1, **filters)
        pages.append([s.conversation_key for s in page[:limit]])
        if len(page) <= limit:
            return pages
        after = page[limit - 1].conversation_key


def test_pages_yield_every_conversation_once_in_key_order(store_url):
    async def work(store: ChatHistoryStore):
        for n, key in enumerate(KEYS):
            await store.append(key, batch(0, n, n % 3 + 1))
        for limit in (1, 2, 5, len(KEYS), len(KEYS) + 3):
            pages = await _pages(store, limit)
            assert [key for page in pages for key in page] == sorted(KEYS), limit
            assert all(0 < len(page) <= limit for page in pages[:-1])
        assert await store.summaries(limit=0) == []
        assert [s.conversation_key for s in await store.summaries(after="a_1", limit=2)] == ["b", "x/1"]
        assert [s.conversation_key for s in await store.summaries("x/", after="x/1")] == ["x/2", "x/3"]
        assert [s.conversation_key for s in await store.summaries("x/", after="a", limit=1)] == ["x/1"]
        assert await store.summaries(after="\U0010ffff") == []
        counts = {s.conversation_key: s.message_count for s in await store.summaries(after="a", limit=3)}
        assert counts == {k: n % 3 + 1 for n, k in enumerate(KEYS) if k in ("a-1", "a.b", "a_1")}

    run(_use(store_url, work))


def test_a_plain_listing_holds_exactly_the_keys_outside_every_namespace(store_url):
    """``plain=True`` answers what a filter of the whole listing by :func:`is_plain` would, page by page, with tags and
    prefixes, after every kind of write that adds or drops a conversation (each store keeps its plain index)."""

    async def check(store: ChatHistoryStore) -> None:
        every = [s.conversation_key for s in await store.summaries()]
        plain = [key for key in every if is_plain(key)]
        for limit in (1, 2, 5, 100):
            assert [key for page in await _pages(store, limit, plain=True) for key in page] == plain, limit
        tagged = [s.conversation_key for s in await store.summaries(tags={"t": "1"})]
        assert [s.conversation_key for s in await store.summaries(tags={"t": "1"}, plain=True)] == [
            key for key in tagged if is_plain(key)
        ]
        after = [s.conversation_key for s in await store.summaries(after="a", limit=2, plain=True)]
        assert after == [key for key in plain if key > "a"][:2]
        assert await store.summaries("x/", plain=True) == []  # a namespace's prefix holds no plain key
        assert [s.conversation_key for s in await store.summaries("a", plain=True)] == [
            key for key in plain if key.startswith("a")
        ]

    async def work(store: ChatHistoryStore) -> None:
        for n, key in enumerate([*KEYS, "a/1", "a/b/c", "b/", "/x", "\ue000/1"]):
            await store.append(key, batch(0, n, 1))
            if n % 2:
                await store.set_metadata(key, MetadataChange(None, False, {"t": "1"}))
        await check(store)
        await store.delete("a")
        await store.delete("x/2")
        await store.replace("b", [])
        await store.replace("new", batch(0, 99, 1))
        await store.replace("new/1", batch(0, 99, 1))
        restored = [ConversationRecord(key, batch(0, 0, 1), "g.1", 1.0, 2.0) for key in ("c", "c/1", "r")]
        await store.restore(restored)
        await check(store)

    run(_use(store_url, work))


def test_a_page_skips_deleted_and_unwritten_conversations(store_url):
    async def work(store: ChatHistoryStore):
        for key in "abcdef":
            await store.append(key, batch(0, 0, 1))
        await store.delete("b")
        await store.delete("c")
        await store.read("bb")  # a read creates nothing
        assert [s.conversation_key for s in await store.summaries(after="a", limit=2)] == ["d", "e"]

    run(_use(store_url, work))


def test_metadata_is_a_merge_patch_outside_the_version(store_url):
    async def work(store: ChatHistoryStore):
        assert await store.set_metadata("nobody", MetadataChange("t", True)) is None
        assert await store.summaries() == []  # nothing was created
        version = (await store.append("c", batch(0, 0, 2))).version

        summary = await store.set_metadata("c", MetadataChange("Trip to Kyoto", True, {"user": "u1", "lang": "ja"}))
        assert summary is not None
        assert (summary.title, dict(summary.tags), summary.version) == (
            "Trip to Kyoto",
            {"user": "u1", "lang": "ja"},
            version,
        )

        summary = await store.set_metadata("c", MetadataChange(tags={"lang": None, "topic": "旅行"}))
        assert summary is not None
        assert (summary.title, dict(summary.tags)) == ("Trip to Kyoto", {"user": "u1", "topic": "旅行"})
        [listed] = await store.summaries()
        assert (listed.title, dict(listed.tags), listed.version) == (
            "Trip to Kyoto",
            {"user": "u1", "topic": "旅行"},
            version,
        )
        assert (await store.read("c")).version == version  # metadata is not part of the version

        summary = await store.set_metadata("c", MetadataChange(None, True))
        assert summary is not None and summary.title is None and dict(summary.tags) == {"user": "u1", "topic": "旅行"}

    run(_use(store_url, work))


def test_replace_keeps_metadata_and_delete_drops_it(store_url):
    async def work(store: ChatHistoryStore):
        await store.append("c", batch(0, 0, 2))
        await store.set_metadata("c", MetadataChange("kept", True, {"k": "v"}))
        await store.replace("c", batch(0, 1, 1))
        await store.append("c", batch(0, 2, 1))
        [summary] = await store.summaries()
        assert (summary.message_count, summary.title, dict(summary.tags)) == (2, "kept", {"k": "v"})

        await store.delete("c")
        await store.append("c", batch(0, 3, 1))  # the same key, a new conversation
        [summary] = await store.summaries()
        assert (summary.title, dict(summary.tags)) == (None, {})
        assert await store.summaries(tags={"k": "v"}) == []

    run(_use(store_url, work))


def test_too_many_tags_writes_nothing(store_url):
    async def work(store: ChatHistoryStore):
        await store.append("c", batch(0, 0, 1))
        full = {f"t{n}": "x" for n in range(MAX_TAGS)}
        await store.set_metadata("c", MetadataChange(tags=full))
        with pytest.raises(TooManyTags):
            await store.set_metadata("c", MetadataChange("new title", True, {"one.more": "x"}))
        [summary] = await store.summaries()
        assert (summary.title, dict(summary.tags)) == (None, full)
        # replacing one tag by another stays within the limit
        await store.set_metadata("c", MetadataChange(tags={"t0": None, "one.more": "x"}))
        [summary] = await store.summaries()
        assert len(summary.tags) == MAX_TAGS and "one.more" in summary.tags

    run(_use(store_url, work))


def test_tag_filters_page_too(store_url):
    async def work(store: ChatHistoryStore):
        keys = [f"k{n:02}" for n in range(12)]
        for n, key in enumerate(keys):
            await store.append(key, batch(0, n, 1))
            tags = {"parity": "even" if n % 2 == 0 else "odd"}
            if n % 3 == 0:
                tags["three"] = "yes"
            await store.set_metadata(key, MetadataChange(tags=tags))
        evens = [k for n, k in enumerate(keys) if n % 2 == 0]
        pages = await _pages(store, 2, tags={"parity": "even"})
        assert [key for page in pages for key in page] == evens
        both = await store.summaries(tags={"parity": "even", "three": "yes"})
        assert [s.conversation_key for s in both] == ["k00", "k06"]
        assert await store.summaries(tags={"parity": "neither"}) == []
        assert [s.conversation_key for s in await store.summaries(after="k06", limit=1, tags={"three": "yes"})] == [
            "k09"
        ]
        # a changed tag moves the conversation between filters
        await store.set_metadata("k01", MetadataChange(tags={"parity": "even"}))
        assert "k01" in [s.conversation_key for s in await store.summaries(tags={"parity": "even"})]
        assert "k01" not in [s.conversation_key for s in await store.summaries(tags={"parity": "odd"})]

    run(_use(store_url, work))


def test_restore_writes_the_metadata_it_is_given(store_url):
    async def work(store: ChatHistoryStore):
        await store.append("old", batch(0, 0, 1))
        await store.set_metadata("old", MetadataChange("before", True, {"a": "1"}))
        current = (await store.read("old")).version
        await store.restore(
            [
                ConversationRecord("old", batch(0, 1, 2), "g.2", 1.0, 2.0, expected=current, tags={"b": "2"}),
                ConversationRecord("new", batch(0, 2, 1), "h.1", 1.0, 2.0, title="copied", tags={"c": "3"}),
            ]
        )
        got = {s.conversation_key: (s.title, dict(s.tags)) for s in await store.summaries()}
        assert got == {"new": ("copied", {"c": "3"}), "old": (None, {"b": "2"})}
        assert [s.conversation_key for s in await store.summaries(tags={"a": "1"})] == []
        assert [s.conversation_key for s in await store.summaries(tags={"b": "2"})] == ["old"]

    run(_use(store_url, work))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda: MetadataChange("x" * 201, True), "title"),
        (lambda: MetadataChange(tags={"": "v"}), "tag name"),
        (lambda: MetadataChange(tags={"has:colon": "v"}), "tag name"),
        (lambda: MetadataChange(tags={"n": "v" * 201}), "value"),
    ],
)
def test_a_bad_change_is_refused_before_any_store(change, message):
    with pytest.raises(MetadataError, match=message):
        change()


def test_concurrent_patches_and_appends_lose_nothing(store_url):
    """Tasks setting one tag each while others append: every tag and every message is there afterwards."""

    async def work(store: ChatHistoryStore):
        await store.append("c", batch(0, 0, 1))

        async def tag(n: int) -> None:
            await store.set_metadata("c", MetadataChange(tags={f"t{n}": str(n)}))

        async def add(n: int) -> None:
            await store.append("c", batch(1, n, 1))

        await asyncio.gather(*(tag(n) for n in range(20)), *(add(n) for n in range(10)))
        [summary] = await store.summaries()
        assert dict(summary.tags) == {f"t{n}": str(n) for n in range(20)}
        assert summary.message_count == 11

    run(_use(store_url, work))
