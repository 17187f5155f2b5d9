"""Titles and tags through export -> import and migrate, on every store; whole-store walks go a page at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chatlab.operations import BadLine, StorePlace, export_conversations, import_conversations
from chatlab.operations.lines import encode_line, parse_conversation
from chatlab.operations.migrate import Migration, verify
from chatlab.stores import ChatHistoryStore, open_store
from chatlab.stores.memory import InMemoryChatHistoryStore
from chatlab.stores.metadata import MAX_TAGS, MetadataChange
from chatlab.vocabulary import FORK_OF, FORK_THROUGH


def message(i: int) -> bytes:
    return b'{"role":"user","contents":[{"$type":"text","text":"%d"}]}' % i


#: The metadata of some of the conversations ``k00`` ... (the others have none).
METADATA = {
    "k00": ('Trip to Kyoto \u4eac\u90fd "quoted"', {"user": "u1", "lang": "ja"}),
    "k03": (None, {FORK_OF: "k00", FORK_THROUGH: "2"}),
    "k05": ("only a title", {}),
}


def run(work: Callable[..., Awaitable[Any]], *stores: ChatHistoryStore) -> Any:
    async def go() -> Any:
        try:
            return await work(*stores)
        finally:
            for store in stores:
                await store.close()

    return asyncio.run(go())


async def fill(store: ChatHistoryStore, count: int) -> None:
    for i in range(count):
        await store.append(f"k{i:02d}", [message(j) for j in range(1 + i % 3)])
    for key, (title, tags) in METADATA.items():
        if int(key[1:]) < count:
            await store.set_metadata(key, MetadataChange.setting(title, tags))


async def metadata(store: ChatHistoryStore) -> dict[str, tuple[str | None, dict[str, str]]]:
    return {s.conversation_key: (s.title, dict(s.tags)) for s in await store.summaries() if s.title or s.tags}


class Spy:
    """Counts a store's listings and what they asked for (every whole-store walk must ask for a page)."""

    def __init__(self, store: ChatHistoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.limits: list[int | None] = []
        listing = store.summaries

        async def summaries(prefix: str = "", **options: Any) -> Any:
            self.limits.append(options.get("limit"))
            return await listing(prefix, **options)

        monkeypatch.setattr(store, "summaries", summaries)


async def exported(store: ChatHistoryStore, page: int) -> bytes:
    lines: list[bytes] = []

    class Out:
        def write(self, data: bytes) -> None:
            lines.append(data)

        def flush(self) -> None:
            pass

    await export_conversations(StorePlace(store), Out(), page=page)  # type: ignore[arg-type]
    return b"".join(lines)


async def imported(store: ChatHistoryStore, data: bytes, existing: str = "skip") -> Any:
    return await import_conversations(StorePlace(store), data.splitlines(keepends=True), existing)


def test_title_and_tags_survive_export_and_import(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exported from one store a page at a time, imported into a store of each kind: the same lines come back."""
    target = open_store(store_url)
    spy = Spy(target, monkeypatch)

    async def work(source: ChatHistoryStore, target: ChatHistoryStore) -> None:
        await fill(source, 9)
        data = await exported(source, page=4)
        lines = data.splitlines()
        assert len(lines) == 9
        first = parse_conversation(lines[0], 1)
        assert (first.conversation_key, first.title, dict(first.tags)) == ("k00", *METADATA["k00"])
        assert b'"title"' not in lines[1] and b'"tags"' not in lines[1]  # only when it has them
        assert dict(parse_conversation(lines[3], 4).tags) == {FORK_OF: "k00", FORK_THROUGH: "2"}

        report = await imported(target, data)
        assert report.outcomes == {"created": 9} and not report.bad_lines
        assert await metadata(target) == {key: (title, tags) for key, (title, tags) in METADATA.items()}
        spy.limits.clear()
        assert await exported(target, page=2) == data
        assert spy.limits and all(limit == 2 for limit in spy.limits)  # never the whole list at once
        for existing in ("skip", "replace", "append"):  # again, whichever the choice: nothing changes
            again = await imported(target, data, existing)
            assert set(again.outcomes) <= {"skipped", "unchanged"}, (existing, again)
        assert await exported(target, page=1000) == data

    run(work, InMemoryChatHistoryStore(), target)


@pytest.mark.parametrize("page", [1, 4, 5, 20, 21, 1000])
def test_an_export_of_more_conversations_than_a_page_holds_each_once(
    store_url: str, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(store_url)
    spy = Spy(store, monkeypatch)

    async def work(store: ChatHistoryStore) -> None:
        await fill(store, 20)
        await store.append("other/k", [message(0)])  # another namespace's: left out, and counted
        spy.limits.clear()
        data = await exported(store, page)
        keys = [parse_conversation(line, 1).conversation_key for line in data.splitlines()]
        assert keys == [f"k{i:02d}" for i in range(20)]
        assert spy.limits and all(limit == page for limit in spy.limits)
        assert len(spy.limits) <= 21 // page + 1
        assert await StorePlace(store).left_out(page) == (1, ["other"])

    run(work, store)


def test_what_an_import_does_with_metadata_for_each_existing_choice(store_url: str) -> None:
    store = open_store(store_url)
    first = encode_line("k", [message(1)], "T1", {"a": "1", "b": "2"})

    async def work(store: ChatHistoryStore) -> None:
        async def outcomes(data: bytes, existing: str) -> dict[str, int]:
            report = await imported(store, data, existing)
            return dict(report.outcomes) if not report.bad_lines else {"bad": len(report.bad_lines)}

        async def held(key: str = "k") -> tuple[str | None, dict[str, str]]:
            (summary,) = await store.summaries(key, limit=1)
            return summary.title, dict(summary.tags)

        assert await outcomes(first, "skip") == {"created": 1}
        assert await held() == ("T1", {"a": "1", "b": "2"})
        await store.set_metadata("k", MetadataChange("mine", True, {"c": "3"}))
        # skip: left as it is, metadata too
        assert await outcomes(first, "skip") == {"skipped": 1}
        assert await held() == ("mine", {"a": "1", "b": "2", "c": "3"})
        # append: the line's title and tags set over the conversation's own
        second = encode_line("k", [message(1)], "T2", {"a": "9"})
        assert await outcomes(second, "append") == {"metadata": 1}
        assert await held() == ("T2", {"a": "9", "b": "2", "c": "3"})
        assert await outcomes(second, "append") == {"unchanged": 1}
        assert await outcomes(encode_line("k", [message(2)], None, {"d": "4"}), "append") == {"appended": 1}
        assert await held() == ("T2", {"a": "9", "b": "2", "c": "3", "d": "4"})
        # replace: the line's messages, title and tags, and only those
        assert await outcomes(first, "replace") == {"replaced": 1}
        assert await held() == ("T1", {"a": "1", "b": "2"})
        assert await store.get("k") == [message(1)]
        assert await outcomes(first, "replace") == {"unchanged": 1}
        assert await outcomes(encode_line("k", [message(1)]), "replace") == {"metadata": 1}  # a line without any
        assert await held() == (None, {})

        # an import stopped between a conversation's messages and its metadata is finished by running it again
        await store.append("bare", [message(5)])
        line = encode_line("bare", [message(5)], "Finished", {"x": "y"})
        assert await outcomes(line, "skip") == {"metadata": 1}
        assert await held("bare") == ("Finished", {"x": "y"})
        assert await outcomes(line, "skip") == {"skipped": 1}

        # too many tags with the conversation's own: refused before anything is written
        many = {f"t{i}": "v" for i in range(MAX_TAGS - 2)}
        await store.set_metadata("k", MetadataChange.setting(None, many))
        crowded = encode_line("k", [message(7)], None, {"new1": "v", "new2": "v", "new3": "v"})
        assert await outcomes(crowded, "append") == {"bad": 1}
        assert await store.get("k") == [message(1)] and await held() == (None, many)

    run(work, store)


def test_an_old_file_imports_and_bad_metadata_is_refused_with_its_line() -> None:
    old = b'{"conversationKey": "k", "messages": [' + message(1) + b"]}"
    line = parse_conversation(old, 1)
    assert (line.conversation_key, line.messages, line.title, dict(line.tags)) == ("k", [message(1)], None, {})
    assert not line.has_metadata
    null = parse_conversation(b'{"conversationKey": "k", "title": null, "tags": null, "messages": []}', 1)
    assert not null.has_metadata
    body = b'"messages": [' + message(1) + b"]"
    for bad, says in [
        (b'"title": 5', '"title" must be a string'),
        (b'"title": ["x"]', '"title" must be a string'),
        (b'"tags": {"a": 5}', '"tags" must be an object whose values are strings'),
        (b'"tags": ["a"]', '"tags" must be an object'),
        (b'"tags": {"bad name": "v"}', "tag name"),
        (b'"title": "' + b"x" * 201 + b'"', "200"),
        (b'"tags": {' + b",".join(b'"t%d": "v"' % i for i in range(MAX_TAGS + 1)) + b"}", f"at most {MAX_TAGS}"),
        (b'"title": "\\ud800"', "surrogate"),
    ]:
        raw = b'{"conversationKey": "k", ' + bad + b", " + body + b"}"
        with pytest.raises(BadLine, match="line 3") as caught:
            parse_conversation(raw, 3)
        assert says in str(caught.value), (bad, caught.value)
    with pytest.raises(BadLine, match="conversationKey"):
        parse_conversation(b'{"conversationKey": 5, "messages": []}', 1)


def _migration(source: ChatHistoryStore, target: ChatHistoryStore) -> Migration:
    return Migration(source, target, batch=2, page=3)


@pytest.mark.parametrize("direction", ["from", "into"])
def test_migrate_copies_titles_and_tags_and_catches_up_on_them(
    store_url: str, direction: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a store of each kind into memory, and from memory into one; a page of each at a time."""
    store, memory = open_store(store_url), InMemoryChatHistoryStore()
    source, target = (store, memory) if direction == "from" else (memory, store)
    spies = [Spy(source, monkeypatch), Spy(target, monkeypatch)]

    async def work(source: ChatHistoryStore, target: ChatHistoryStore) -> None:
        await fill(source, 10)
        report = await _migration(source, target).run()
        walks = [limit for spy in spies for limit in spy.limits]
        assert None not in walks and 3 in walks  # pages, never the whole list
        assert (report.total, report.copied, report.mismatches) == (10, 10, [])
        assert await metadata(target) == await metadata(source)

        # after the copy: the source retitled and retagged, the target tagged by its own clients; a later run
        # gives the target what it lacks and discards nothing it holds
        await source.set_metadata("k00", MetadataChange("Kyoto, renamed", True, {"lang": None}))
        await source.set_metadata("k03", MetadataChange.setting(None, {"new": "tag"}))
        await source.append("k01", [message(9)])
        await source.set_metadata("k01", MetadataChange.setting("now titled"))
        await target.set_metadata("k00", MetadataChange.setting(None, {"target": "own"}))
        assert sorted(await verify(source, target, page=3)) == ["k01", "k03"]
        before = await metadata(target)

        again = await _migration(source, target).run()
        assert again.mismatches == [] and dict(again.settled) == {"metadata": 1, "caught up": 1}
        held = await metadata(target)
        assert held["k00"] == (before["k00"][0], {"user": "u1", "target": "own", "lang": "ja"})
        assert held["k01"] == ("now titled", {})
        assert held["k03"] == (None, {FORK_OF: "k00", FORK_THROUGH: "2", "new": "tag"})
        assert await target.get("k01") == await source.get("k01")
        third = await _migration(source, target).run()
        assert (third.copied, third.already, dict(third.settled), third.mismatches) == (0, 10, {}, [])

    run(work, source, target)


def _service_of(store_url: str) -> Any:
    """A service over a fresh store of each kind."""
    from chatlab.service import start_service

    if store_url == "memory://":
        return start_service(store=InMemoryChatHistoryStore())  # its own: start_service shares one per URL
    return start_service(store=store_url)


def test_through_a_service_pages_follow_link_and_titles_go_by_patch(store_url: str) -> None:
    """``--url``: the listing a page at a time following ``Link: rel=next``; titles and tags read from it and
    written with ``PATCH``; a fork's origin goes with it."""
    import httpx

    from chatlab.operations import ServicePlace

    source, target = _service_of(store_url), _service_of("memory://")
    assert source.url != target.url
    try:
        with httpx.Client(base_url=source.url) as http:
            for i in range(7):
                assert http.post(
                    f"/chat-history/c{i}", json={"messages": [{"role": "user", "contents": []}]}
                ).is_success
            for key, (title, tags) in {"c0": ("First", {"lang": "ja"}), "c6": ("Last \u2014 \u4eac", {})}.items():
                assert http.patch(f"/chat-history/{key}", json={"title": title, "tags": tags}).is_success
            fork = http.post("/chat-history/c0/fork?through=1").headers["location"].rsplit("/", 1)[1]

        asked: list[str] = []

        async def export(url: str, page: int, keys: list[str] | None = None) -> bytes:
            place = ServicePlace(url)
            place.client.http.event_hooks["request"].append(_record(asked))
            lines: list[bytes] = []

            class Out:
                def write(self, data: bytes) -> None:
                    lines.append(data)

                def flush(self) -> None:
                    pass

            try:
                await export_conversations(place, Out(), keys, page=page)  # type: ignore[arg-type]
            finally:
                await place.close()
            return b"".join(lines)

        data = asyncio.run(export(source.url, 3))
        listings = [url for url in asked if "/chat-history?" in url]
        assert len(listings) == 3 and all("limit=3" in url for url in listings)  # 8 conversations, pages of 3
        parsed = {
            line.conversation_key: line for line in map(lambda raw: parse_conversation(raw, 1), data.splitlines())
        }
        assert sorted(parsed) == sorted([*(f"c{i}" for i in range(7)), fork])
        assert (parsed["c0"].title, dict(parsed["c0"].tags)) == ("First", {"lang": "ja"})
        assert parsed["c6"].title == "Last \u2014 \u4eac" and not parsed["c1"].has_metadata
        assert dict(parsed[fork].tags) == {FORK_OF: "c0", FORK_THROUGH: "1"}
        asked.clear()
        only = asyncio.run(export(source.url, 3, ["c6", "absent"]))  # one conversation's metadata: one lookup
        assert [url for url in asked if "/chat-history?" in url] == [f"{source.url}/chat-history?limit=100&after=c"]
        assert parse_conversation(only, 1).title == "Last \u2014 \u4eac" and only.count(b"\n") == 1

        async def load(data: bytes, existing: str = "skip") -> Any:
            place = ServicePlace(target.url)
            try:
                return await import_conversations(place, data.splitlines(keepends=True), existing)
            finally:
                await place.close()

        assert asyncio.run(load(data)).outcomes == {"created": 8}
        assert asyncio.run(export(target.url, 1000)) == data
        assert asyncio.run(load(data, "replace")).outcomes == {"unchanged": 8}
        old = encode_line("c0", [b'{"role":"user","contents":[]}'])
        assert asyncio.run(load(old, "replace")).outcomes == {"metadata": 1}
        with httpx.Client(base_url=target.url) as http:
            rows = {row["conversationKey"]: row for row in http.get("/chat-history").json()}
        assert "title" not in rows["c0"] and "tags" not in rows["c0"] and rows["c6"]["title"] == "Last \u2014 \u4eac"
    finally:
        source.stop()
        target.stop()


def _record(asked: list[str]) -> Callable[[Any], Awaitable[None]]:
    async def hook(request: Any) -> None:
        asked.append(str(request.url))

    return hook
