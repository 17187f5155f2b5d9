"""The PostgreSQL store's group reads and group appends (real PostgreSQL): concurrent calls share one statement, and
each still gets its own answer, its own refusal, its own deadline; a failed batch writes nothing; the lock order
keeps batches and the retention sweep from deadlocking."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from chatlab.stores import StoreError
from chatlab.stores.base import ABSENT, Idempotency, IdempotencyKeyReused, VersionMismatch, WriteResult
from tests.faults import PausableProxy
from tests.stores.store_helpers import table_user_role
from tests.stores.test_store_timeouts_http import through


def _store(url: str, **options: float) -> object:
    from chatlab.stores.postgres import PostgresChatHistoryStore

    return PostgresChatHistoryStore(url, **options)  # type: ignore[arg-type]


def _batches(store):  # type: ignore[no-untyped-def]
    return store.batches()


def message(**fields: object) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


def count_of(version: str) -> int:
    return int(version.rsplit(".", 1)[1])


def test_concurrent_reads_and_appends_each_get_their_own_answer(postgres_url: str) -> None:
    """Many tasks append to and read few conversations: every append's version counts exactly up to its own
    messages, every read (each with its own slice) returns its own conversation's messages from where it asked,
    including what its caller appended before, and at the end every conversation is contiguous and whole."""

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        written: dict[str, list[tuple[int, list[bytes]]]] = {f"k{k}": [] for k in range(3)}
        try:

            async def worker(t: int) -> None:
                last: dict[str, int] = {}
                for j in range(12):
                    key = f"k{(t + j) % 3}"
                    size = 1 + (t + j) % 3
                    bodies = [message(t=t, j=j, m=m) for m in range(size)]
                    result = await store.append(key, bodies)
                    count = count_of(result.version)
                    assert count > last.get(key, 0)  # this task's appends to a key, in its order
                    last[key] = count
                    written[key].append((count, bodies))
                    mine = await store.read_slice(key, count - size, size)  # read-your-writes, its own slice
                    assert mine.messages == bodies and mine.start == count - size and mine.count >= count
                    if j % 3 == 0:
                        whole = await store.read(key)
                        assert whole.messages[count - size : count] == bodies
                        assert count_of(whole.version) == len(whole.messages) >= count
                        assert all(json.loads(m)["t"] >= 0 for m in whole.messages)
                    elif j % 3 == 1:
                        got = await store.get(key)
                        assert got[count - size : count] == bodies

            await asyncio.gather(*(worker(t) for t in range(24)))
            for key, appends in written.items():
                conversation = await store.read(key)
                assert count_of(conversation.version) == len(conversation.messages)
                assert sum(len(bodies) for _, bodies in appends) == len(conversation.messages)
                for count, bodies in appends:  # each append's messages, contiguous, where its version says
                    assert conversation.messages[count - len(bodies) : count] == bodies
            batches = _batches(store)
            for batcher in (batches.reads, batches.appends):  # calls did share statements
                assert batcher.members > batcher.statements
        finally:
            await store.close()

    asyncio.run(main())


def test_refusals_in_a_batch_touch_nothing_of_the_others(postgres_url: str) -> None:
    """One statement with a failed If-Match, a reused idempotency key, a replay and successes beside them: each
    member gets its own answer, the refused ones write nothing, and two members to one conversation see each other
    in arrival order."""

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            va = (await store.append("a", [message(a=0)])).version
            vb = (await store.append("b", [message(b=0)], idempotency=Idempotency("used", "fp1"))).version
            vc = (await store.append("c", [message(c=0)])).version
            generation_c = vc.rsplit(".", 1)[0]
            appends = _batches(store).appends
            statements, members = appends.statements, appends.members
            results = await asyncio.gather(
                store.append("a", [message(a=1)], if_match=["stale"]),
                store.append("a", [message(a=2)], if_match=[va]),
                store.append("b", [message(b=1)], idempotency=Idempotency("used", "other")),
                store.append("b", [message(b=2)], idempotency=Idempotency("used", "fp1")),
                store.append("c", [message(c=1), message(c=2)], if_match=[vc]),
                store.append("c", [message(c=3)], if_match=[f"{generation_c}.3"]),  # sees the one before
                store.append("c", [message(c=4)], if_match=[vc]),  # no longer current
                store.append("d", [message(d=1)], if_match=["*"]),  # "*": only an existing conversation
                store.append("e", [message(e=1)], idempotency=Idempotency("twice", "fp")),
                store.append("e", [message(e=2)], idempotency=Idempotency("twice", "fp")),  # a replay of the one before
                return_exceptions=True,
            )
            assert (appends.statements, appends.members) == (statements + 1, members + 10)  # one statement
            assert isinstance(results[0], VersionMismatch) and results[0].current == va
            assert results[1] == WriteResult(f"{va.rsplit('.', 1)[0]}.2")
            assert isinstance(results[2], IdempotencyKeyReused)
            assert results[3] == WriteResult(vb, replayed=True)
            assert results[4] == WriteResult(f"{generation_c}.3")
            assert results[5] == WriteResult(f"{generation_c}.4")
            assert isinstance(results[6], VersionMismatch) and results[6].current == f"{generation_c}.4"
            assert isinstance(results[7], VersionMismatch) and results[7].current == ABSENT
            assert isinstance(results[8], WriteResult) and results[9] == WriteResult(results[8].version, replayed=True)
            assert (await store.read("a")).messages == [message(a=0), message(a=2)]
            assert (await store.read("b")).messages == [message(b=0)]
            assert (await store.read("c")).messages == [message(c=i) for i in range(4)]
            assert (await store.read("d")).version == ABSENT
            assert (await store.read("e")).messages == [message(e=1)]
        finally:
            await store.close()

    asyncio.run(main())


def test_a_failed_batch_writes_nothing_of_any_member(postgres_url: str) -> None:
    """A batch whose statement fails (here its statement timeout, one member waiting for a lock another session
    holds) fails every member with StoreError, and nothing of it is committed, not even the members that ran."""
    import psycopg

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]

    with psycopg.connect(base, autocommit=True) as holder:

        def hash_of(key: str) -> int:
            row = holder.execute("SELECT hashtextextended(%s, 0)", (f"chatlab:{schema}:{key}",)).fetchone()
            assert row is not None
            return int(row[0])

        # a free key taken before the held one in the lock order: it runs, then the batch fails
        free = next(f"free{i}" for i in range(100) if hash_of(f"free{i}") < hash_of("held"))

        async def main() -> None:
            store = _store(postgres_url, timeout=10.0, statement_timeout=0.5)
            try:
                await store.append(free, [message(n=0)])
                holder.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"chatlab:{schema}:held",))
                appends = _batches(store).appends
                statements = appends.statements
                results = await asyncio.gather(
                    store.append(free, [message(n=1)]),
                    store.append("held", [message(n=1)]),
                    store.append("other", [message(n=1)]),
                    return_exceptions=True,
                )
                assert appends.statements == statements + 1
                assert all(isinstance(r, StoreError) and "timed out" in str(r) for r in results), results
                assert len({id(r) for r in results}) == 3  # an exception of its own each
                holder.execute("SELECT pg_advisory_unlock_all()")
                assert (await store.read(free)).messages == [message(n=0)]
                assert (await store.read("held")).version == ABSENT
                assert (await store.read("other")).version == ABSENT
                assert (await store.append("held", [message(n=2)])).version.endswith(".1")
            finally:
                await store.close()

        asyncio.run(main())


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[tuple[PausableProxy, str]]:
    proxy = PausableProxy(urlsplit(postgres_url).port or 5432)
    try:
        yield proxy, through(postgres_url, proxy)
    finally:
        proxy.close()


def test_every_call_ends_within_its_timeout_behind_a_frozen_database(proxy: tuple[PausableProxy, str]) -> None:
    """Waves of reads and appends against a server that stopped answering: those in running batches and those
    queued behind them (every drainer busy, more than a batch holds) each fail within their own timeout."""
    pausable, url = proxy

    async def main() -> None:
        store = _store(url, timeout=1.0)
        try:
            await store.append("k", [message(n=0)])
            await asyncio.gather(*(store.read("k") for _ in range(8)))
            pausable.pause()
            outcomes: list[tuple[float, BaseException | None]] = []

            async def timed(call) -> None:  # type: ignore[no-untyped-def]
                started = time.monotonic()
                try:
                    await call
                    outcomes.append((time.monotonic() - started, None))
                except Exception as exc:
                    outcomes.append((time.monotonic() - started, exc))

            waves = []
            for wave in range(8):
                size = 80 if wave == 5 else 6  # one wave larger than a batch
                waves += [asyncio.create_task(timed(store.read("k"))) for _ in range(size)]
                waves += [asyncio.create_task(timed(store.append(f"k{i}", [message(n=i)]))) for i in range(size)]
                await asyncio.sleep(0.1)
            await asyncio.gather(*waves)
            assert len(outcomes) == 2 * (7 * 6 + 80)
            for elapsed, error in outcomes:
                assert isinstance(error, StoreError) and "within 1 s" in str(error), error
                assert elapsed < 1.4, elapsed
            pausable.resume()
            for _ in range(120):  # bounded: the pool reconnects with backoff
                try:
                    assert (await store.read("k")).messages[0] == message(n=0)
                    break
                except StoreError:
                    await asyncio.sleep(0.5)
            else:
                pytest.fail("the store did not recover")
        finally:
            pausable.resume()
            await store.close()

    asyncio.run(main())


def test_a_call_whose_deadline_passes_in_the_queue_fails_without_running(postgres_url: str) -> None:
    """With the only drainer waiting for a connection, a call queued behind it fails at its own deadline, with the
    error of a wait for a connection, and writes nothing; the call that waited on runs once a connection is free."""

    async def main() -> None:
        store = _store(postgres_url, max_size=1, timeout=5.0)  # one connection: one statement of a kind at once
        try:
            await store.read("k")

            async def hold() -> None:
                async with store.connections.acquire():
                    await asyncio.sleep(0.8)

            holder = asyncio.create_task(hold())
            await asyncio.sleep(0.05)
            first = asyncio.create_task(store.append("first", [message(n=1)]))  # its drainer waits at the gate
            await asyncio.sleep(0.05)
            store.timeout = 0.3
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"is unreachable: no connection within 0\.3 s"):
                await store.append("late", [message(n=1)])
            assert time.monotonic() - started < 0.6
            await holder
            assert (await first).version.endswith(".1")
            assert (await store.read("late")).version == ABSENT
        finally:
            await store.close()

    asyncio.run(main())


def test_the_sweep_and_batched_appends_do_not_deadlock(postgres_url: str) -> None:
    """Two stores (two processes' worth of connections) append batches over many conversations in random orders
    while a third sweeps them away as they come due: every lock taker takes its locks in one order, so no
    statement fails (PostgreSQL would report a deadlock after ``deadlock_timeout``), and what is left is whole."""

    async def main() -> None:
        writers = [_store(postgres_url, timeout=30.0) for _ in range(2)]
        sweeper = _store(postgres_url, timeout=30.0)
        sweeper.retention = 0.0  # type: ignore[attr-defined]
        stop = time.monotonic() + 3.0
        swept = 0
        try:
            await writers[0].append("warm", [message(n=0)])

            async def appender(t: int) -> None:
                rng = random.Random(t)
                while time.monotonic() < stop:
                    keys = rng.sample(range(40), 8)
                    store = writers[t % 2]
                    await asyncio.gather(*(store.append(f"s{k}", [message(t=t, k=k)] * 2) for k in keys))

            async def sweep() -> None:
                nonlocal swept
                while time.monotonic() < stop:
                    swept += await sweeper.sweep()  # type: ignore[attr-defined]

            await asyncio.gather(sweep(), *(appender(t) for t in range(8)))
            assert swept > 0
            assert all(_batches(w).appends.members > _batches(w).appends.statements for w in writers)
            async with sweeper.connections.acquire() as conn:  # type: ignore[attr-defined]
                found = await conn.fetch(
                    "SELECT c.conversation_key, c.message_count, count(m.*), coalesce(max(m.position), -1)"
                    f' FROM "{sweeper.schema}".chatlab_conversations c'  # type: ignore[attr-defined]
                    f' LEFT JOIN "{sweeper.schema}".chatlab_messages m USING (conversation_key)'  # type: ignore[attr-defined]
                    " GROUP BY c.conversation_key, c.message_count"
                )
                for key, count, rows, last in found:
                    assert count == rows == last + 1, key
        finally:
            for store in (*writers, sweeper):
                await store.close()  # type: ignore[attr-defined]

    asyncio.run(main())


def test_a_member_whose_arguments_the_database_refuses_fails_alone(postgres_url: str) -> None:
    """A key with a NUL character (PostgreSQL text cannot hold one) or a position past ``bigint`` makes the batch's
    statement fail before it runs anything: the members then run one at a time, so only that one fails, as alone."""

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0)
        try:
            version = (await store.append("ok", [message(n=0)])).version
            reads = await asyncio.gather(
                store.read("ok"),
                store.read("bad\x00key"),
                store.read_slice("ok", 2**70),
                store.get("ok"),
                return_exceptions=True,
            )
            assert reads[0].messages == [message(n=0)] and reads[3] == [message(n=0)]  # type: ignore[union-attr]
            assert isinstance(reads[1], StoreError) and "NUL" in str(reads[1])
            assert reads[2].messages == [] and reads[2].count == 1  # type: ignore[union-attr]
            appends = await asyncio.gather(
                store.append("ok", [message(n=1)], if_match=[version]),
                store.append("bad\x00key", [message(n=1)]),
                store.append("other", [message(n=1)]),
                return_exceptions=True,
            )
            assert isinstance(appends[0], WriteResult) and isinstance(appends[2], WriteResult)
            assert isinstance(appends[1], StoreError)
            assert (await store.read("ok")).messages == [message(n=0), message(n=1)]
            assert (await store.read("other")).messages == [message(n=1)]
        finally:
            await store.close()

    asyncio.run(main())


def test_a_burst_larger_than_a_batch_is_split_and_every_call_answered(postgres_url: str) -> None:
    """More calls at once than a statement takes (``max_batch``): they go in two statements, each call answered with
    its own conversation."""
    MAX_BATCH = 64

    async def main() -> None:
        store = _store(postgres_url, timeout=30.0, max_batch=MAX_BATCH)
        try:
            await asyncio.gather(*(store.append(f"k{i}", [message(k=i)] * (i % 3 + 1)) for i in range(10)))
            reads, appends = _batches(store).reads, _batches(store).appends
            before = reads.statements, appends.statements
            count = MAX_BATCH + 36
            got = await asyncio.gather(*(store.read(f"k{i % 10}") for i in range(count)))
            assert [c.messages for c in got] == [[message(k=i % 10)] * (i % 10 % 3 + 1) for i in range(count)]
            assert reads.statements == before[0] + 2
            written = await asyncio.gather(*(store.append(f"n{i}", [message(n=i)]) for i in range(count)))
            assert all(w.version.endswith(".1") for w in written) and appends.statements == before[1] + 2
            assert [m for i in range(count) for m in await store.get(f"n{i}")] == [message(n=i) for i in range(count)]
        finally:
            await store.close()

    asyncio.run(main())


def test_a_role_that_may_not_create_the_missing_function_reads_and_is_told_why_it_cannot_append(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A schema that lacks the append function (an older chatlab made it), used by a role that may read and write its
    tables but not create in it: reads work; appends fail with a StoreError (503) that says what to do, and
    nothing is written; the warning is logged once."""
    from chatlab.stores.postgres.appends import FUNCTION

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]

    async def create() -> None:
        store = _store(postgres_url)
        try:
            await store.append("k", [message(n=0)])
        finally:
            await store.close()

    asyncio.run(create())
    with table_user_role(postgres_url, schema) as (admin, url):
        admin.execute(f'DROP FUNCTION "{schema}"."{FUNCTION}"')

        async def use() -> None:
            store = _store(url, timeout=30.0)
            try:
                assert (await store.read("k")).messages == [message(n=0)]
                results = await asyncio.gather(
                    *(store.append(f"k{i % 3}", [message(n=i)]) for i in range(4)), return_exceptions=True
                )
                for result in results:
                    assert isinstance(result, StoreError) and "run chatlab once with a role" in str(result)
                assert (await store.read("k0")).version == ABSENT
            finally:
                await store.close()

        asyncio.run(use())
        assert sum("may not create it" in r.getMessage() for r in caplog.records) == 1
        exists = admin.execute(
            "SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s AND p.proname = %s",
            (schema, FUNCTION),
        ).fetchone()
        assert exists is None


def _held_batcher(batches: list[list[str]], release: asyncio.Event, statements: int):  # type: ignore[no-untyped-def]
    """A batcher whose first statement runs until ``release`` is set (the scheduling alone)."""
    from chatlab.stores.postgres.batches import Batcher

    async def run(args: list[str], deadline: float) -> list[str]:
        batches.append(list(args))
        if len(batches) == 1:
            await release.wait()
        return args

    connections = SimpleNamespace(timeout=lambda: 30.0, error=lambda exc: StoreError("late"))
    return Batcher(run, connections, statements=statements)


def test_calls_queued_behind_a_busy_drainer_wait_and_share_the_next() -> None:
    """With every drainer busy, the calls behind the running statement go together after it."""

    async def main() -> None:
        batches: list[list[str]] = []
        release = asyncio.Event()
        batcher = _held_batcher(batches, release, statements=1)
        first = batcher.submit("a")
        await asyncio.sleep(0)  # its statement runs
        later = []
        for args in "bc":  # in turns of the loop of their own
            later.append(batcher.submit(args))
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        assert batches == [["a"]]
        release.set()
        assert await asyncio.gather(first, *later) == ["a", "b", "c"]
        assert batches == [["a"], ["b", "c"]]

    asyncio.run(main())


def test_calls_behind_a_long_statement_start_another_while_there_is_room() -> None:
    """A long statement (a large conversation's read) does not hold up the calls behind it while another drainer
    may run."""

    async def main() -> None:
        batches: list[list[str]] = []
        release = asyncio.Event()
        batcher = _held_batcher(batches, release, statements=2)
        first = batcher.submit("a")
        await asyncio.sleep(0)
        assert await asyncio.wait_for(batcher.submit("b"), 5.0) == "b"  # answered while "a" still runs
        assert not first.done() and batches == [["a"], ["b"]]
        release.set()
        assert await first == "a"

    asyncio.run(main())
