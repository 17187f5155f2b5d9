"""Helpers shared by the store tests: messages that say which batch they belong to, and running writers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from chatlab.stores import ChatHistoryStore, open_store


def batch(writer: int, number: int, size: int) -> list[bytes]:
    """``size`` compact JSON messages, each naming its writer, batch number, index and batch size."""
    return [
        json.dumps(
            {"role": "user", "contents": [{"$type": "text", "text": f"w{writer} b{number} {i}/{size}"}]},
            separators=(",", ":"),
        ).encode()
        for i in range(size)
    ]


def check_batches(messages: Sequence[bytes], expected: dict[tuple[int, int], int]) -> None:
    """Every expected batch (writer, number) -> size is present once, whole, contiguous and in order."""
    seen: dict[tuple[int, int], int] = {}
    i = 0
    while i < len(messages):
        text = json.loads(messages[i])["contents"][0]["text"]
        w, b, pos = text.split(" ")
        index, size = map(int, pos.split("/"))
        key = (int(w[1:]), int(b[1:]))
        assert index == 0, f"message {i} starts in the middle of batch {key}: {text}"
        assert key not in seen, f"batch {key} appears twice"
        run = messages[i : i + size]
        assert run == batch(key[0], key[1], size), f"batch {key} at {i} is interleaved or partial"
        seen[key] = size
        i += size
    assert seen == expected, f"missing batches: {sorted(set(expected) - set(seen))}"


def batches_present(messages: Sequence[bytes]) -> dict[tuple[int, int], int]:
    """The batches (writer, number) -> size that ``messages`` hold, read from each batch's first message."""
    present: dict[tuple[int, int], int] = {}
    i = 0
    while i < len(messages):
        w, b, pos = json.loads(messages[i])["contents"][0]["text"].split(" ")
        size = int(pos.split("/")[1])
        present[(int(w[1:]), int(b[1:]))] = size
        i += size
    return present


def run_with_store(store_url: str, work: Callable[[ChatHistoryStore], Awaitable[None]]) -> None:
    """``await work(store)`` on a store opened from ``store_url``, closed afterwards."""

    async def main() -> None:
        store = open_store(store_url)
        try:
            await work(store)
        finally:
            await store.close()

    asyncio.run(main())


def run_writers(writer: Callable[[int], None], writers: int, timeout: float = 120) -> None:
    """``writer(0)`` ... ``writer(writers - 1)`` at once, one thread each; fails on what any of them raised."""
    errors: list[BaseException] = []

    def guarded(w: int) -> None:
        try:
            writer(w)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a writer did not finish"
    assert errors == [], errors


def call_append_function(base: str, schema: str, batches: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The PostgreSQL append function's answers for each batch of ``AppendMember``s in turn, called as the store
    calls it (one statement per batch), on a connection of its own to the server at ``base``."""
    import asyncpg

    from chatlab.stores.postgres.appends import append_many
    from chatlab.stores.postgres.statements import Statements

    async def main() -> list[list[Any]]:
        conn = await asyncpg.connect(base)
        try:
            call = Statements(schema).append
            return [list(await append_many(conn, call, members)) for members in batches]
        finally:
            await conn.close()

    return asyncio.run(main())


@contextlib.contextmanager
def table_user_role(postgres_url: str, schema: str) -> Iterator[tuple[Any, str]]:
    """A PostgreSQL role that may read and write the tables of ``schema`` but not create in it (a deployment's
    application role): an admin connection and the store URL of that role; the role is dropped afterwards."""
    import psycopg

    base = postgres_url.split("?", 1)[0]
    role = f"chatlab_test_user_{os.getpid()}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        try:
            admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
            admin.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
            parts = urlsplit(postgres_url)
            yield admin, parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}").geturl()
        finally:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
