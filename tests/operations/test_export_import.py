"""Export -> import over real HTTP and real stores: byte for byte, safe to repeat, bad lines refused whole."""

from __future__ import annotations

import asyncio
import io

import httpx
import pytest

from chatlab.operations import BadLine, ServicePlace, StorePlace, export_conversations, import_conversations
from chatlab.operations.lines import encode_line, parse_line
from chatlab.service import ServiceSettings, start_service
from chatlab.service.schema import decode_messages_body
from chatlab.stores import open_store

# numbers and text whose bytes a re-encoding could change
TRICKY = [
    b'{"role":"user","contents":[{"$type":"text","text":"caf\xc3\xa9 \\u2028 \\"q\\" 1.0e5"}]}',
    b'{"role":"assistant","contents":[{"$type":"text","text":"x"}],"additionalProperties":{"n":1.10,"m":-0.0}}',
    # an integer past Python's int-string limit, which the service keeps as sent
    b'{"role":"user","contents":[{"$type":"text","text":"big"}],"additionalProperties":{"n":' + b"9" * 5000 + b"}}",
]

#: TRICKY as the service stores it (compact, its own escapes): what any import stores too
STORED = decode_messages_body(b'{"messages":[' + b",".join(TRICKY) + b"]}", max_messages=10)
OTHER = b'{"role":"user","contents":[{"$type":"text","text":"other"}]}'


def _fill(url: str, prefix: str = "") -> None:
    with httpx.Client(base_url=url) as http:
        for i in range(5):
            body = b'{"messages":[' + b",".join(TRICKY[: 1 + i % 3]) + b"]}"
            r = http.post(f"/chat-history/{prefix}c{i}", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 202
        assert http.put("/chat-history/empty", json={"messages": []}).status_code == 204


def _export(place) -> bytes:
    out = io.BytesIO()
    asyncio.run(_run(place, lambda p: export_conversations(p, out)))
    return out.getvalue()


async def _run(place, work):
    try:
        return await work(place)
    finally:
        await place.close()


def _import(place, data: bytes, existing: str = "skip"):
    return asyncio.run(_run(place, lambda p: import_conversations(p, data.splitlines(keepends=True), existing)))


def test_round_trip_byte_for_byte_through_every_store(store_url) -> None:
    """Written over HTTP, exported from the service, imported into a fresh service on the same kind of store."""
    source = start_service(store=store_url)
    try:
        _fill(source.url)
        exported = _export(ServicePlace(source.url))
        with httpx.Client(base_url=source.url) as http:
            originals = {f"c{i}": http.get(f"/chat-history/c{i}").content for i in range(5)}
    finally:
        source.stop()
    assert exported.count(b"\n") == 6
    target = start_service()
    try:
        report = _import(ServicePlace(target.url), exported)
        assert report.outcomes == {"created": 6} and not report.bad_lines
        with httpx.Client(base_url=target.url) as http:
            for key, body in originals.items():
                assert http.get(f"/chat-history/{key}").content == body
        assert _export(ServicePlace(target.url)) == exported
        # the same again, whichever the choice: nothing changes
        for existing in ("skip", "replace", "append"):
            again = _import(ServicePlace(target.url), exported, existing)
            assert set(again.outcomes) <= {"skipped", "unchanged"}, (existing, again)
        assert _export(ServicePlace(target.url)) == exported
    finally:
        target.stop()


def test_store_to_store_round_trip(store_url, tmp_path) -> None:
    """Export straight from a store, import straight into a SQLite file: the bytes the service stored."""
    if store_url == "memory://":
        pytest.skip("memory:// is reached through a service (the test above)")
    store = open_store(store_url)

    async def fill() -> None:
        for i in range(3):
            await store.append(f"k{i}", STORED)
        await store.close()

    asyncio.run(fill())
    exported = _export(StorePlace(open_store(store_url)))
    target_url = f"sqlite:///{tmp_path / 'copy.db'}"
    assert _import(StorePlace(open_store(target_url)), exported).outcomes == {"created": 3}
    assert _export(StorePlace(open_store(target_url))) == exported
    assert parse_line(exported.splitlines()[0], 1) == ("k0", STORED)


def test_replace_and_append_apply_over_what_is_there(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    line = encode_line("k", STORED)
    assert _import(StorePlace(open_store(url)), line).outcomes == {"created": 1}
    other = encode_line("k", [OTHER])
    assert _import(StorePlace(open_store(url)), other, "append").outcomes == {"appended": 1}
    assert _import(StorePlace(open_store(url)), other, "append").outcomes == {"unchanged": 1}
    assert _import(StorePlace(open_store(url)), other, "skip").outcomes == {"skipped": 1}
    assert _export(StorePlace(open_store(url))) == encode_line("k", [*STORED, OTHER])
    assert _import(StorePlace(open_store(url)), line, "replace").outcomes == {"replaced": 1}
    assert _export(StorePlace(open_store(url))) == line


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"not json", "not valid JSON"),
        (b'{"conversationKey": "k"}', '"messages"'),
        (b'{"messages": []}', "conversationKey"),
        (b'{"conversationKey": "k", "messages": [{"role": 3}]}', "messages[0]"),
        (b'{"conversationKey": "k", "messages": [' + TRICKY[0] + b", NaN]}", "NaN"),
    ],
)
def test_a_bad_line_is_reported_with_its_number_and_nothing_of_it_written(tmp_path, line, says) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    data = encode_line("good1", TRICKY) + line + b"\n" + encode_line("good2", TRICKY)
    report = _import(StorePlace(open_store(url)), data)
    assert [bad.line for bad in report.bad_lines] == [2] and says in str(report.bad_lines[0])
    assert report.outcomes == {"created": 2}
    assert b'"k"' not in _export(StorePlace(open_store(url)))
    with pytest.raises(BadLine, match="line 7"):
        parse_line(line, 7)


def test_through_a_service_with_api_keys(tmp_path) -> None:
    """--url with its API key: the caller's namespace is exported and imported, the keys without it."""
    key = "k" * 32
    settings = ServiceSettings(api_keys={key: "alice"})
    server = start_service(store=f"sqlite:///{tmp_path / 'a.db'}", settings=settings)
    try:
        place = ServicePlace(server.url, key)
        assert _import(place, encode_line("conv", TRICKY)).outcomes == {"created": 1}
        exported = _export(ServicePlace(server.url, key))  # the service's compact JSON of TRICKY
        assert parse_line(exported, 1)[0] == "conv" and len(parse_line(exported, 1)[1]) == len(TRICKY)
        assert _import(ServicePlace(server.url, key), exported, "replace").outcomes == {"unchanged": 1}
        with pytest.raises(Exception, match="401"):
            _export(ServicePlace(server.url))
    finally:
        server.stop()
