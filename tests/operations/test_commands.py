"""``python -m chatlab export`` and ``import`` as a user runs them: files, exit statuses, what they print."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from chatlab.operations import encode_line
from chatlab.stores import open_store

MESSAGE = b'{"role":"user","contents":[{"$type":"text","text":"hi"}]}'


def _chatlab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-m", "chatlab", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_export_then_import_with_a_bad_line(tmp_path) -> None:
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"

    async def fill() -> None:
        store = open_store(source)
        await store.append("one", [MESSAGE])
        await store.append("two", [MESSAGE, MESSAGE])
        await store.close()

    asyncio.run(fill())
    backup = tmp_path / "backup.jsonl"
    exported = _chatlab("export", "--store", source, "-o", str(backup))
    assert exported.returncode == 0 and "exported 2 conversations" in exported.stderr
    assert backup.read_bytes() == encode_line("one", [MESSAGE]) + encode_line("two", [MESSAGE, MESSAGE])

    backup.write_bytes(backup.read_bytes() + b'{"conversationKey": "bad", "messages": [1]}\n')
    imported = _chatlab("import", str(backup), "--store", target)
    assert imported.returncode == 1
    assert "line 3: messages[0]" in imported.stderr
    assert "2 conversations written (2 created), 0 left as they were, 1 bad lines skipped (line 3)" in imported.stderr
    again = _chatlab("import", str(backup), "--store", target, "--existing", "append")
    assert "0 conversations written, 2 left as they were (2 unchanged), 1 bad lines skipped" in again.stderr
    only = _chatlab("export", "--store", target, "--key", "two")
    assert only.stdout == encode_line("two", [MESSAGE, MESSAGE]).decode()


def test_usage_errors_say_what_to_do(tmp_path) -> None:
    both = _chatlab("export", "--store", f"sqlite:///{tmp_path / 'a.db'}", "--url", "http://127.0.0.1:1")
    assert both.returncode == 2 and "not both" in both.stderr
    memory = _chatlab("migrate", "--from", "memory://", "--to", f"sqlite:///{tmp_path / 'a.db'}")
    assert memory.returncode == 2 and "memory://" in memory.stderr
    for missing in (tmp_path / "nosuch.jsonl", tmp_path):  # missing, a directory
        result = _chatlab("import", str(missing), "--store", f"sqlite:///{tmp_path / 'a.db'}")
        assert result.returncode == 2 and "cannot read" in result.stderr and "Traceback" not in result.stderr


def test_titles_and_tags_go_through_export_import_and_migrate(tmp_path) -> None:
    from chatlab.stores.metadata import MetadataChange

    source, target, moved = (f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db", "c.db"))

    async def fill() -> None:
        store = open_store(source)
        await store.append("one", [MESSAGE])
        await store.set_metadata("one", MetadataChange.setting("Trip to Kyoto", {"lang": "ja"}))
        await store.append("alice/two", [MESSAGE])  # a namespace's: left out of a plain export, and said so
        await store.close()

    async def titles(url: str) -> dict[str, tuple[str | None, dict[str, str]]]:
        store = open_store(url)
        try:
            return {s.conversation_key: (s.title, dict(s.tags)) for s in await store.summaries()}
        finally:
            await store.close()

    asyncio.run(fill())
    backup = tmp_path / "backup.jsonl"
    exported = _chatlab("export", "--store", source, "-o", str(backup))
    assert exported.returncode == 0 and "1 conversations of namespaces alice left out" in exported.stderr
    assert backup.read_bytes() == encode_line("one", [MESSAGE], "Trip to Kyoto", {"lang": "ja"})
    imported = _chatlab("import", str(backup), "--store", target)
    assert imported.returncode == 0 and "1 created" in imported.stderr
    assert asyncio.run(titles(target)) == {"one": ("Trip to Kyoto", {"lang": "ja"})}
    migrated = _chatlab("migrate", "--from", source, "--to", moved)
    assert migrated.returncode == 0 and "all verified" in migrated.stderr
    assert asyncio.run(titles(moved)) == asyncio.run(titles(source))
