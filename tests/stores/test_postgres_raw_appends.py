"""The PostgreSQL store's appends on libpq (real PostgreSQL), a lone append's statement and a batch's: arguments the
database refuses fail their member alone, a statement timeout fails the statement's members with the store's error
and leaves the connection usable, a deallocated statement is prepared again, and what comes back is what was sent
(non-ASCII keys, large bodies, empty appends and empty If-Match lists)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chatlab.stores import StoreError
from chatlab.stores.base import Idempotency, VersionMismatch, WriteResult


def _store(url: str, **options: float) -> Any:
    from chatlab.stores.postgres import PostgresChatHistoryStore

    return PostgresChatHistoryStore(url, **options)  # type: ignore[arg-type]


def _statements(store: Any) -> int:
    from chatlab.stores.postgres_batches import batches_of

    return batches_of(store).appends.statements


def message(n: int, text: str = "été ✓") -> bytes:
    return json.dumps({"n": n, "text": text}, ensure_ascii=False, separators=(",", ":")).encode()


def test_arguments_the_database_refuses_fail_their_member_alone(postgres_url: str) -> None:
    """A key with a lone surrogate, an idempotency key with a NUL: refused before anything is sent, alone (a lone
    append) or in a batch (the others written); nothing of the refused member is stored."""

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            with pytest.raises(StoreError, match="utf-8"):
                await store.append("bad\ud800", [message(0)])  # a lone append's statement
            with pytest.raises(StoreError, match="NUL"):
                await store.append("k", [message(0)], idempotency=Idempotency("i\x00", "f", 60.0))
            assert await store.summaries() == []
            outcomes = await asyncio.gather(
                store.append("k", [message(1)]),
                store.append("bad\ud800", [message(2)]),
                store.append("k", [message(3)], idempotency=Idempotency("i\x00", "f", 60.0)),
                store.append("other", [message(4)], idempotency=Idempotency("fine", "f", 60.0)),
                return_exceptions=True,
            )
            assert isinstance(outcomes[0], WriteResult) and isinstance(outcomes[3], WriteResult)
            assert isinstance(outcomes[1], StoreError) and "utf-8" in str(outcomes[1])
            assert isinstance(outcomes[2], StoreError) and "NUL" in str(outcomes[2])
            assert (await store.read("k")).messages == [message(1)]
            assert (await store.read("other")).messages == [message(4)]
            assert [s.conversation_key for s in await store.summaries()] == ["k", "other"]
        finally:
            await store.close()

    asyncio.run(main())


def test_a_statement_timeout_fails_its_members_and_the_connection_goes_on(postgres_url: str) -> None:
    """A conversation's lock held elsewhere past the statement timeout: the lone append, and every member of the
    batch it is in, fail with the store's "timed out" error, writing nothing; once the lock is free, the same
    connection appends."""
    import psycopg

    base = postgres_url.split("?", 1)[0]

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0, statement_timeout=0.3, min_size=1, max_size=1)
        try:
            await store.append("held", [message(0)])
            with psycopg.connect(base, autocommit=True) as other:
                other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"chatlab:{store.schema}:held",))
                with pytest.raises(StoreError, match="timed out"):
                    await store.append("held", [message(1)])
                before = _statements(store)
                outcomes = await asyncio.gather(
                    store.append("free", [message(2)]),
                    store.append("held", [message(3)]),
                    return_exceptions=True,
                )
                assert _statements(store) == before + 1  # one batch, failed whole
                assert all(isinstance(o, StoreError) and "timed out" in str(o) for o in outcomes), outcomes
            assert await store.get("free") == []
            assert (await store.append("held", [message(4)])).version.endswith(".2")
            assert await store.get("held") == [message(0), message(4)]
        finally:
            await store.close()

    asyncio.run(main())


def test_appends_prepare_their_statements_again_when_gone_or_already_there(postgres_url: str) -> None:
    """A session whose statements were deallocated, or that holds them already (this process forgot it prepared
    them): a lone append and a batch still run, each statement prepared once in the session."""
    from chatlab.stores import postgres_raw

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0, min_size=1, max_size=1)  # one connection: the same session
        try:
            await store.append("a", [message(0)])
            await asyncio.gather(store.append("a", [message(1)]), store.append("b", [message(2)]))
            async with store._connection() as conn:
                await conn.execute("DEALLOCATE ALL")
            await store.append("a", [message(3)])
            await asyncio.gather(store.append("a", [message(4)]), store.append("b", [message(5)]))
            postgres_raw._prepared.clear()
            await store.append("a", [message(6)])
            await asyncio.gather(store.append("a", [message(7)]), store.append("b", [message(8)]))
            assert await store.get("a") == [message(n) for n in (0, 1, 3, 4, 6, 7)]
            assert await store.get("b") == [message(2), message(5), message(8)]
            async with store._connection() as conn:
                cur = await conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'chatlab_%'")
                prepared = (await cur.fetchone())[0]
            assert prepared == 3  # the single append's, the batch's, the reads' (get)
        finally:
            await store.close()

    asyncio.run(main())


def test_what_is_sent_comes_back_alone_and_in_batches(postgres_url: str) -> None:
    """Non-ASCII keys and messages, a 4 MB message, empty appends with If-Match (empty arrays of messages and of
    versions in the batch's statement), an empty If-Match list refused, replays: each as a lone append would."""

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            large = message(0, "現" * 1_400_000)
            first = await store.append("会話-été", [large])
            assert await store.get("会話-été") == [large]
            idem = Idempotency("キー", "指紋", 60.0)
            outcomes = await asyncio.gather(
                store.append("会話-été", [], if_match=[first.version]),
                store.append("会話-été", [], if_match=[]),
                store.append("empty", [], if_match=["*"]),
                store.append("会話-été", [message(1), large], idempotency=idem),
                store.append("会話-été", [message(1), large], idempotency=idem),
                return_exceptions=True,
            )
            assert outcomes[0] == WriteResult(first.version)
            assert isinstance(outcomes[1], VersionMismatch) and isinstance(outcomes[2], VersionMismatch)
            assert isinstance(outcomes[3], WriteResult) and outcomes[3].version.endswith(".3")
            assert outcomes[4] == WriteResult(outcomes[3].version, replayed=True)
            assert await store.get("会話-été") == [large, message(1), large]
            assert await store.get("empty") == []
        finally:
            await store.close()

    asyncio.run(main())


def test_a_member_the_server_refuses_fails_alone(postgres_url: str) -> None:
    """A key too long for the index (the server's ``ProgramLimitExceeded``, raised by the batch's statement): the
    batch wrote nothing, its members run one at a time, so that one fails and the others are written."""
    import secrets

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            await store.append("first", [message(0)])
            before = _statements(store)
            long = secrets.token_hex(3000)  # 6,000 bytes of no pattern: more than a btree entry holds
            outcomes = await asyncio.gather(
                store.append("a", [message(1)]),
                store.append(long, [message(2)]),
                store.append("b", [message(3)]),
                return_exceptions=True,
            )
            assert isinstance(outcomes[0], WriteResult) and isinstance(outcomes[2], WriteResult)
            assert isinstance(outcomes[1], StoreError) and "index row size" in str(outcomes[1])
            assert _statements(store) == before + 4  # the batch, then each member alone
            assert await store.get("a") == [message(1)] and await store.get("b") == [message(3)]
            assert await store.get(long) == []
        finally:
            await store.close()

    asyncio.run(main())
