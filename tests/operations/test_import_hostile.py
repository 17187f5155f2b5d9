"""Issue 30 #5, #6, #8: an import never stops part-way without a summary, bounds its memory per line, checks
keys as the service does, stores the service's compact form, and a second ``--existing append`` changes nothing."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys

import httpx

from chatlab.operations import StorePlace, import_conversations, numbered_lines
from chatlab.operations.lines import encode_line
from chatlab.service import ServiceSettings, start_service
from chatlab.stores import open_store

MESSAGE = b'{"role":"user","contents":[{"$type":"text","text":"hi"}]}'
OTHER = b'{"role":"assistant","contents":[{"$type":"text","text":"later"}]}'


def _chatlab(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "chatlab", *args]
    result = subprocess.run(command, capture_output=True, env=env, timeout=300, input=stdin)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


async def _stored(url: str) -> dict[str, list[bytes]]:
    store = open_store(url)
    try:
        return {s.conversation_key: (await store.read(s.conversation_key)).messages for s in await store.summaries()}
    finally:
        await store.close()


def _line(key: str, *messages: bytes) -> bytes:
    return encode_line(key, list(messages))


def test_a_byte_order_mark_and_bad_lines_are_reported_and_the_import_goes_on(tmp_path) -> None:
    target = f"sqlite:///{tmp_path / 'h.db'}"
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(
        b"\xef\xbb\xbf"
        + _line("first", MESSAGE)
        + b"not json\n"
        + _line("second", MESSAGE)
        + b'{"conversationKey": "third", "messages": [{"role": 3}]}\n'
        + _line("fourth", MESSAGE)
    )
    result = _chatlab("import", str(backup), "--store", target)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "line 2: " in result.stderr and "line 4: messages[0]" in result.stderr
    assert "3 conversations written (3 created), 0 left as they were, 2 bad lines skipped (line 2, 4)" in result.stderr
    assert sorted(asyncio.run(_stored(target))) == ["first", "fourth", "second"]


def test_strict_writes_nothing_when_a_line_is_bad(tmp_path) -> None:
    target = f"sqlite:///{tmp_path / 'h.db'}"
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(_line("first", MESSAGE) + _line("../x", MESSAGE) + _line("third", MESSAGE))
    result = _chatlab("import", str(backup), "--store", target, "--strict")
    assert result.returncode == 1 and "line 2: invalid conversationKey" in result.stderr
    assert "nothing written" in result.stderr
    assert asyncio.run(_stored(target)) == {}
    piped = _chatlab("import", "-", "--store", target, "--strict", stdin=backup.read_bytes())
    assert piped.returncode == 2 and "give a file" in piped.stderr


def test_import_into_a_store_checks_keys_as_the_service_does(tmp_path) -> None:
    target = f"sqlite:///{tmp_path / 'h.db'}"
    backup = tmp_path / "backup.jsonl"
    bad = ["alice/secret", "../x", "a\x00b", "tab\there", "x" * 200]
    backup.write_bytes(b"".join(_line(key, MESSAGE) for key in [*bad, "good"]))
    result = _chatlab("import", str(backup), "--store", target)
    assert result.returncode == 1
    for number in range(1, len(bad) + 1):
        assert f"line {number}: invalid conversationKey" in result.stderr
    assert list(asyncio.run(_stored(target))) == ["good"]
    # one namespace's conversations: keys as its clients send them, stored under the namespace
    spaced = _chatlab("import", str(backup), "--store", target, "--namespace", "alice")
    assert "1 conversations written" in spaced.stderr
    assert sorted(asyncio.run(_stored(target))) == ["alice/good", "good"]
    key = "k" * 32
    server = start_service(store=target, settings=ServiceSettings(api_keys={key: "alice"}))
    try:
        answer = httpx.get(f"{server.url}/chat-history/good", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200 and answer.json() == [json.loads(MESSAGE)]
    finally:
        server.stop()
    exported = _chatlab("export", "--store", target)
    assert exported.stdout == _line("good", MESSAGE).decode()
    assert "1 conversations of namespaces alice left out" in exported.stderr
    assert _chatlab("export", "--store", target, "--namespace", "alice").stdout == _line("good", MESSAGE).decode()


def test_with_a_permissive_key_pattern_the_store_rules_still_hold(tmp_path) -> None:
    """``CHATLAB_KEY_PATTERN=.*`` (the service's own setting) still keeps keys out of other namespaces."""
    target = f"sqlite:///{tmp_path / 'h.db'}"
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(b"".join(_line(key, MESSAGE) for key in ["alice/secret", "..", "a b"]))
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "CHATLAB_KEY_PATTERN": ".*"}
    command = [sys.executable, "-m", "chatlab", "import", str(backup), "--store", target]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1 and "line 1: invalid conversationKey" in result.stderr
    assert "line 2: invalid conversationKey" in result.stderr
    assert list(asyncio.run(_stored(target))) == ["a b"]


def test_a_line_over_the_limit_is_refused_without_being_read_whole(tmp_path) -> None:
    """A line past the service's request limit is reported and skipped; the process never holds it."""
    target = f"sqlite:///{tmp_path / 'h.db'}"
    backup = tmp_path / "huge.jsonl"
    huge = 48 * 1024 * 1024
    with backup.open("wb") as out:
        out.write(_line("before", MESSAGE))
        out.write(b'{"conversationKey":"huge","messages":[{"role":"user","contents":[{"$type":"text","text":"')
        chunk = b"x" * (1 << 20)
        for _ in range(huge // len(chunk)):
            out.write(chunk)
        out.write(b'"}]}]}\n')
        out.write(_line("after", MESSAGE))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    measure = (
        "import resource, subprocess, sys; "
        "r = subprocess.run(sys.argv[1:], capture_output=True); "
        "sys.stderr.write(r.stderr.decode()); "
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    command = [sys.executable, "-c", measure, sys.executable, "-m", "chatlab", "import", str(backup), "--store", target]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    status, peak_kib = map(int, result.stdout.split())
    assert status == 1 and "line 2: longer than 8388608 bytes" in result.stderr
    assert sorted(asyncio.run(_stored(target))) == ["after", "before"]
    assert peak_kib < 200 * 1024, f"the import held {peak_kib} KiB for a {huge}-byte line"


def test_lines_are_read_in_bounded_pieces() -> None:
    class Watched(io.BytesIO):
        largest = 0

        def readline(self, size: int | None = -1, /) -> bytes:
            assert size is not None and size > 0, "every read is bounded"
            line = super().readline(size)
            Watched.largest = max(Watched.largest, len(line))
            return line

    data = _line("a", MESSAGE) + b"y" * 10_000 + b"\n" + _line("b", MESSAGE)
    lines = list(numbered_lines(Watched(data), 1000))
    assert [(n, line is None) for n, line in lines] == [(1, False), (2, True), (3, False)]
    assert Watched.largest <= 1000 + 5


def test_a_second_append_import_changes_nothing_even_after_later_writes(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    data = _line("k", MESSAGE, OTHER)

    def run(existing: str) -> object:
        async def go() -> object:
            place = StorePlace(open_store(url))
            try:
                return await import_conversations(place, io.BytesIO(data), existing)
            finally:
                await place.close()

        return asyncio.run(go())

    async def write_later() -> None:
        store = open_store(url)
        await store.append("k", [MESSAGE])
        await store.close()

    asyncio.run(write_later())
    assert run("append").outcomes == {"appended": 1}
    asyncio.run(write_later())  # a client writes after the import
    assert run("append").outcomes == {"unchanged": 1}
    assert asyncio.run(_stored(url))["k"] == [MESSAGE, MESSAGE, OTHER, MESSAGE]


def test_imported_messages_are_stored_compact_as_api_writes_are(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    spaced = b'{ "conversationKey" : "k", "messages" : [ { "role" : "user", "contents" : [ { "$type" : "text", '
    spaced += b'"text" : "hi" } ] } ] }\n'
    backup = tmp_path / "spaced.jsonl"
    backup.write_bytes(spaced)
    assert _chatlab("import", str(backup), "--store", url).returncode == 0
    server = start_service()
    try:
        with httpx.Client(base_url=server.url) as http:
            http.post(
                "/chat-history/k",
                content=b'{"messages":[' + MESSAGE + b"]}",
                headers={"Content-Type": "application/json"},
            )
            assert _chatlab("export", "--url", server.url).stdout.encode() == _line("k", MESSAGE)
    finally:
        server.stop()
    assert asyncio.run(_stored(url))["k"] == [MESSAGE]


def test_through_a_service_bad_keys_are_skipped_and_an_unreachable_service_stops_with_one_line(tmp_path) -> None:
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(_line("ok1", MESSAGE) + _line("not ok", MESSAGE) + _line("ok2", MESSAGE))
    server = start_service()
    try:
        result = _chatlab("import", str(backup), "--url", server.url)
        assert result.returncode == 1 and "line 2: " in result.stderr and "answered 400" in result.stderr
        assert "2 conversations written (2 created)" in result.stderr
    finally:
        server.stop()
    gone = _chatlab("import", str(backup), "--url", "http://127.0.0.1:9")
    assert gone.returncode == 3 and "Traceback" not in gone.stderr
    error = [line for line in gone.stderr.splitlines() if line.startswith("error: import stopped")]
    assert len(error) == 1 and "line 1" in error[0] and "run the same command again" in error[0]
