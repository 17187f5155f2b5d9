"""The contract for incremental reads, on every store: read_slice, generation.count versions, and over
HTTP ``GET ?after=N&limit=L`` and ``HEAD``."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from store_helpers import run_with_store

from chatlab.runner import BackgroundServer
from chatlab.stores import ChatHistoryStore, ConversationSlice
from chatlab.stores.base import ABSENT, VersionMismatch

MESSAGES = [
    json.dumps({"role": "user", "contents": [{"$type": "text", "text": f"m{i} 😀"}]}).encode() for i in range(7)
]


def _parts(version: str) -> tuple[str, int]:
    generation, _, count = version.rpartition(".")
    assert generation and count.isdigit(), version
    return generation, int(count)


def test_slices_are_ranges_with_the_whole_conversations_count_and_version(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        assert await store.read_slice("c") == ConversationSlice([], 0, 0, ABSENT)
        assert await store.read_slice("c", 3, 2) == ConversationSlice([], 3, 0, ABSENT)
        version = (await store.append("c", MESSAGES[:5])).version
        assert await store.read_slice("c") == ConversationSlice(MESSAGES[:5], 0, 5, version)
        assert await store.read_slice("c", 2) == ConversationSlice(MESSAGES[2:5], 2, 5, version)
        assert await store.read_slice("c", 2, 2) == ConversationSlice(MESSAGES[2:4], 2, 5, version)
        assert await store.read_slice("c", 4, 10) == ConversationSlice(MESSAGES[4:5], 4, 5, version)
        assert await store.read_slice("c", 5) == ConversationSlice([], 5, 5, version)
        assert await store.read_slice("c", 50, 1) == ConversationSlice([], 50, 5, version)
        assert await store.read_slice("c", 0, 0) == ConversationSlice([], 0, 5, version)  # a count
        for bad in ((-1, None), (0, -1)):
            with pytest.raises(ValueError):
                await store.read_slice("c", *bad)
        await store.replace("c", [])
        empty = await store.read_slice("c")
        assert (empty.messages, empty.count) == ([], 0) and empty.version != ABSENT  # exists, empty
        assert all(type(m) is bytes for m in (await store.read_slice("c")).messages)

    run_with_store(store_url, work)


def test_versions_keep_their_generation_while_only_appended_to(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        v1 = (await store.append("c", MESSAGES[:2])).version
        g1, n1 = _parts(v1)
        assert n1 == 2
        v2 = (await store.append("c", MESSAGES[2:3])).version
        assert _parts(v2) == (g1, 3)
        assert (await store.append("c", [])).version == v2
        v3 = (await store.append("c", MESSAGES[3:4], if_match=[v2])).version
        assert _parts(v3) == (g1, 4)
        v4 = (await store.replace("c", MESSAGES[:4])).version  # the same count, another generation
        g4, n4 = _parts(v4)
        assert g4 != g1 and n4 == 4
        assert (await store.read("c")).version == v4
        await store.delete("c")
        assert (await store.read_slice("c")).version == ABSENT
        v5 = (await store.append("c", MESSAGES[:4])).version
        g5, _ = _parts(v5)
        assert g5 not in (g1, g4)  # a deleted conversation written again never gets an old version
        with pytest.raises(VersionMismatch):
            await store.append("c", MESSAGES[:1], if_match=[v4])
        replay = await store.read_slice("c", 4)
        assert (replay.messages, replay.count, replay.version) == ([], 4, v5)

    run_with_store(store_url, work)


def test_a_slice_is_one_snapshot_while_others_append(store_url: str) -> None:
    """Count, version and messages of each slice agree, whatever is appended meanwhile (another thread, loop)."""
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(store: ChatHistoryStore) -> None:
        async def main() -> None:
            for i in range(60):
                await store.append("c", [MESSAGES[i % 7]] * 3)

        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    async def work(store: ChatHistoryStore) -> None:
        thread = threading.Thread(target=writer, args=(store,))  # one store, used from two event loops
        thread.start()
        seen = 0
        give_up = time.monotonic() + 120  # a bound on a hung writer, not a timing check
        try:
            while time.monotonic() < give_up:
                finished = done.is_set()
                part = await store.read_slice("c", seen)
                if part.version == ABSENT:
                    assert part.count == 0 and part.messages == []
                else:
                    _, count = _parts(part.version)
                    assert count == part.count == seen + len(part.messages), (part.version, part.count, seen)
                    assert len(part.messages) % 3 == 0  # whole batches only
                    seen = part.count
                if finished:
                    break
                await asyncio.sleep(0)
        finally:
            thread.join(60)
        assert not errors, errors
        assert seen == 180 and (await store.read_slice("c", 0, 0)).count == 180

    run_with_store(store_url, work)


def _messages(n: int, start: int = 0) -> list[dict]:
    return [{"role": "user", "contents": [{"$type": "text", "text": f"m{i}"}]} for i in range(start, start + n)]


def test_http_after_and_limit(http: httpx.Client) -> None:
    assert http.post("/chat-history/k", json={"messages": _messages(5)}).status_code == 202
    whole = http.get("/chat-history/k")
    assert whole.json() == _messages(5) and whole.headers["x-message-count"] == "5"
    etag = whole.headers["etag"]

    part = http.get("/chat-history/k", params={"after": 2})
    assert part.json() == _messages(3, 2)
    assert (part.headers["etag"], part.headers["x-message-count"]) == (etag, "5")
    assert "link" not in part.headers

    page = http.get("/chat-history/k", params={"after": 1, "limit": 2})
    assert page.json() == _messages(2, 1)
    assert page.headers["link"] == '</chat-history/k?after=3&limit=2>; rel="next"'
    last = http.get("/chat-history/k", params={"after": 3, "limit": 2})
    assert last.json() == _messages(2, 3) and "link" not in last.headers
    first = http.get("/chat-history/k", params={"limit": 1})
    assert first.json() == _messages(1) and "after=1&limit=1" in first.headers["link"]

    beyond = http.get("/chat-history/k", params={"after": 99})
    assert beyond.status_code == 200 and beyond.json() == [] and beyond.headers["x-message-count"] == "5"
    unknown = http.get("/chat-history/nobody", params={"after": 0})
    assert unknown.json() == [] and unknown.headers["etag"] == '"0"' and unknown.headers["x-message-count"] == "0"

    for params in ({"after": -1}, {"after": "x"}, {"limit": 0}, {"limit": -3}, {"after": 2**60}):
        bad = http.get("/chat-history/k", params=params)
        assert bad.status_code == 400, params
        assert bad.headers["content-type"] == "application/problem+json"


def test_http_head_counts_without_reading(http: httpx.Client) -> None:
    unknown = http.head("/chat-history/k")
    assert unknown.status_code == 200 and unknown.content == b""
    assert unknown.headers["x-message-count"] == "0" and unknown.headers["etag"] == '"0"'
    http.post("/chat-history/k", json={"messages": _messages(3)})
    head = http.head("/chat-history/k")
    assert head.headers["x-message-count"] == "3" and head.content == b""
    assert head.headers["etag"] == http.get("/chat-history/k").headers["etag"]
    http.put("/chat-history/k", json={"messages": []})
    emptied = http.head("/chat-history/k")
    assert emptied.headers["x-message-count"] == "0" and emptied.headers["etag"] != '"0"'  # exists, empty
    assert http.head("/chat-history/not%20a%20key").status_code == 400


def test_http_appends_continue_the_generation_and_replaces_start_a_new_one(http: httpx.Client) -> None:
    v1 = http.post("/chat-history/k", json={"messages": _messages(2)}).headers["etag"].strip('"')
    v2 = http.post("/chat-history/k", json={"messages": _messages(1)}).headers["etag"].strip('"')
    assert _parts(v2) == (_parts(v1)[0], 3)
    v3 = http.put("/chat-history/k", json={"messages": _messages(3)}).headers["etag"].strip('"')
    assert _parts(v3)[0] != _parts(v1)[0] and _parts(v3)[1] == 3


@pytest.mark.anyio
async def test_provider_count_and_existence_use_head(service: BackgroundServer) -> None:
    from chatlab.client.provider import RemoteChatHistoryProvider

    methods: list[str] = []

    async def record(request: httpx.Request) -> None:
        methods.append(request.method)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as client:
        provider = RemoteChatHistoryProvider(service.url, http_client=client)
        assert await provider.get_stored_message_count("k") == 0
        assert not await provider.session_exists("k")
        await client.put(f"{service.url}/chat-history/k", json={"messages": []})
        assert await provider.session_exists("k")  # empty, but there
        await client.post(f"{service.url}/chat-history/k", json={"messages": _messages(4)})
        assert await provider.get_stored_message_count("k") == 4
    assert methods == ["HEAD", "HEAD", "PUT", "HEAD", "POST", "HEAD"]
