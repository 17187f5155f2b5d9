"""The PostgreSQL store's reads on libpq (real PostgreSQL): one statement answers a batch that mixes every kind of
read, each as a lone call would be answered; the prepared statement survives being dropped or made twice."""

from __future__ import annotations

import asyncio
import json

from chatlab.stores import StoreError
from chatlab.stores.base import ABSENT, ConversationArray


def _store(url: str, **options: float) -> object:
    from chatlab.stores.postgres import PostgresChatHistoryStore

    return PostgresChatHistoryStore(url, **options)  # type: ignore[arg-type]


def message(n: int) -> bytes:
    return json.dumps({"n": n, "text": "été ✓"}, ensure_ascii=False, separators=(",", ":")).encode()


def test_one_statement_answers_every_kind_of_read_as_alone(postgres_url: str) -> None:
    """Whole reads (read_array and read), slices (positions past 9 in number
    order, a limit of 0, positions past ``bigint``), of conversations that exist, are empty or do not exist, all
    in one batch: each answer is the one its call gets alone."""
    from chatlab.stores.postgres_batches import batches_of

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            many = [message(n) for n in range(12)]
            await store.append("many", many)  # type: ignore[attr-defined]
            await store.replace("empty", [])  # type: ignore[attr-defined]
            calls = [
                lambda: store.read_array("many"),  # type: ignore[attr-defined]
                lambda: store.read_array("empty"),  # type: ignore[attr-defined]
                lambda: store.read_array("missing"),  # type: ignore[attr-defined]
                lambda: store.read("many"),  # type: ignore[attr-defined]
                lambda: store.get("missing"),  # type: ignore[attr-defined]
                lambda: store.read_slice("many", 9, 2),  # type: ignore[attr-defined]
                lambda: store.read_slice("many", 3, 0),  # type: ignore[attr-defined]
                lambda: store.read_slice("many", 2**70),  # type: ignore[attr-defined]
                lambda: store.read_slice("many", 10, 2**70),  # type: ignore[attr-defined]
                lambda: store.read_slice("missing", 1, 1),  # type: ignore[attr-defined]
            ]
            alone = [await call() for call in calls]
            reads = batches_of(store).reads  # type: ignore[arg-type]
            before = reads.statements
            together = await asyncio.gather(*(call() for call in calls))
            assert reads.statements == before + 1
            assert together == alone
            version = alone[3].version
            assert alone[0] == ConversationArray(b"[" + b",".join(many) + b"]", 12, version)
            assert alone[1].array == b"[]" and alone[1].count == 0 and alone[1].version != ABSENT
            assert alone[2] == ConversationArray(b"[]", 0, ABSENT)
            assert type(alone[0].array) is bytes and all(type(m) is bytes for m in alone[3].messages)
            assert alone[5].messages == many[9:11] and alone[6].messages == [] and alone[7].messages == []
            assert alone[8].messages == many[10:] and alone[8].count == 12
            assert alone[9].version == ABSENT and alone[9].count == 0
        finally:
            await store.close()  # type: ignore[attr-defined]

    asyncio.run(main())


def test_the_read_statement_is_prepared_again_when_gone_or_already_there(postgres_url: str) -> None:
    """A session whose statements were deallocated, or that holds the statement under its name already (this
    process forgot it prepared it), still reads: prepared again once, or used as it is."""
    from chatlab.stores import postgres_raw

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0, min_size=1, max_size=1)  # one connection: the same session
        try:
            await store.append("c", [message(1)])  # type: ignore[attr-defined]
            assert (await store.read("c")).messages == [message(1)]  # type: ignore[attr-defined]
            async with store._connection() as conn:  # type: ignore[attr-defined]
                await conn.execute("DEALLOCATE ALL")
            assert (await store.read_array("c")).array == b"[" + message(1) + b"]"  # type: ignore[attr-defined]
            postgres_raw._prepared.clear()
            assert (await store.read_slice("c", 0, 1)).messages == [message(1)]  # type: ignore[attr-defined]
            async with store._connection() as conn:  # type: ignore[attr-defined]
                cur = await conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'chatlab_%'")
                assert (await cur.fetchone())[0] == 1
        finally:
            await store.close()  # type: ignore[attr-defined]

    asyncio.run(main())


def test_a_key_postgresql_cannot_hold_fails_its_read_alone(postgres_url: str) -> None:
    """A key with a lone surrogate (no UTF-8 for it) fails as a NUL does: that read alone, the batch's others read."""

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            await store.append("ok", [message(1)])  # type: ignore[attr-defined]
            reads = await asyncio.gather(
                store.read("ok"),  # type: ignore[attr-defined]
                store.read("bad\ud800"),  # type: ignore[attr-defined]
                store.read_array("ok"),  # type: ignore[attr-defined]
                return_exceptions=True,
            )
            assert reads[0].messages == [message(1)]  # type: ignore[union-attr]
            assert isinstance(reads[1], StoreError) and "utf-8" in str(reads[1])
            assert reads[2].count == 1  # type: ignore[union-attr]
        finally:
            await store.close()  # type: ignore[attr-defined]

    asyncio.run(main())
