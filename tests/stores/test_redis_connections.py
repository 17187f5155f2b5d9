"""The Redis store's own connections: what redis-py's pool did on checkout it does too, and its replies stay in step."""

from __future__ import annotations

import asyncio

import pytest

from chatlab.stores.redis import CHATLAB_PARAMETERS, RedisChatHistoryStore, split_url


def test_a_connection_the_server_closed_is_opened_again_before_use(redis_url: str) -> None:
    import redis

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            pool = await store._clients.get()
            idle = pool._link
            assert idle is not None
            client_id = await pool.call("CLIENT", "ID")
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                assert admin.client_kill_filter(_id=client_id) == 1  # as a Redis restart or its idle timeout does
            await asyncio.sleep(0.2)  # the end of the stream arrives
            assert (await store.read("k")).messages == [b'{"n":1}']  # not a StoreError
            fresh = pool._link  # the closed one was dropped before use, a new one opened
            assert fresh is not None and fresh is not idle and idle.broken and not idle.connection.is_connected
            assert pool._open == {fresh.connection}
        finally:
            await store.close()

    asyncio.run(main())


def test_concurrent_operations_share_one_connection_and_a_given_up_one_retires_it(redis_url: str) -> None:
    import redis

    from chatlab.stores import StoreError

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0, max_connections=1)
        try:
            await store.append("k", [b'{"n":1}'])
            pool = await store._clients.get()
            link = pool._link
            reads = await asyncio.gather(*(store.read("k") for _ in range(20)))
            assert all(r.messages == [b'{"n":1}'] for r in reads) and pool._link is link  # pipelined on one
            assert pool._open == {link.connection}
            # a command that holds the connection, and one behind it that is given up (as at its deadline)
            blocked = store._list_key("blocked")
            first = asyncio.ensure_future(pool.call("BLPOP", blocked, 5))
            second = asyncio.ensure_future(pool.call("BLPOP", blocked, 5))
            await asyncio.sleep(0.1)
            second.cancel()
            await asyncio.sleep(0)
            assert link.retired and pool._link is None and link.connection.is_connected  # first still waits on it
            with pytest.raises(StoreError, match="Too many connections"):  # retired but open: the limit holds
                await store.read("k")
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                admin.rpush(blocked, b"x")
            assert await first == [blocked, b"x"]
            assert not link.connection.is_connected and pool._open == set()  # closed once nothing waits on it
            assert (await store.read("k")).messages == [b'{"n":1}']  # on a new connection
            assert pool._link is not link and pool._open == {pool._link.connection}
        finally:
            await store.close()

    asyncio.run(main())


def test_an_error_reply_in_a_read_is_raised_and_the_connection_stays_in_step(redis_url: str) -> None:
    import redis

    from chatlab.stores import StoreError

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                admin.set(store._list_key("bad"), "not a list")
            pool = await store._clients.get()
            link = pool._link
            for read in (store.read("bad"), store.read_slice("bad", 1, 1)):
                with pytest.raises(StoreError, match="WRONGTYPE"):
                    await read
            assert (await store.read("k")).messages == [b'{"n":1}']  # the replies after the error are k's
            assert pool._link is link and not link.retired  # every reply of the failed read was read: kept
        finally:
            await store.close()

    asyncio.run(main())


def test_bytes_nobody_asked_for_break_the_connection(redis_url: str) -> None:
    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            pool = await store._clients.get()
            link = pool._link
            assert link is not None
            link.data_received(b"+OK\r\n")  # as a reply arriving with no request waiting
            assert link.broken
            assert (await store.read("k")).messages == [b'{"n":1}']
            assert pool._link is not link and link.connection not in pool._open
        finally:
            await store.close()

    asyncio.run(main())


def test_reads_tell_absent_unversioned_and_versioned_conversations_apart(redis_url: str) -> None:
    """The read's version comes from plain commands (no script): the states the write scripts leave or find."""
    import redis

    from chatlab.stores.base import ABSENT
    from chatlab.stores.redis import UNVERSIONED

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            written = await store.append("new", [b"1", b"2", b"3"])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                admin.zadd(store._index_key, {"old": 0})  # layout 1: indexed, messages, no version
                admin.rpush(store._list_key("old"), b"1", b"2")
                admin.rpush(store._list_key("stray"), b"1")  # not in the index: not a conversation
            for key, version, messages in [
                ("new", written.version, [b"1", b"2", b"3"]),
                ("old", UNVERSIONED, [b"1", b"2"]),
                ("stray", ABSENT, [b"1"]),
                ("none", ABSENT, []),
            ]:
                whole = await store.read(key)
                assert (whole.messages, whole.version) == (messages, version), key
                array = await store.read_array(key)
                assert (array.array, array.count, array.version) == (
                    b"[" + b",".join(messages) + b"]",
                    len(messages),
                    version,
                )
                part = await store.read_slice(key, 1, 1)
                assert (part.messages, part.count, part.version) == (messages[1:2], len(messages), version), key
                head = await store.read_slice(key, 0, 0)
                assert (head.messages, head.count, head.version) == ([], len(messages), version), key
                rest = await store.read_slice(key, 1)
                assert (rest.messages, rest.count, rest.version) == (messages[1:], len(messages), version), key
        finally:
            await store.close()

    asyncio.run(main())


def test_closing_the_store_stops_a_connection_being_opened() -> None:
    """A server that accepts and never answers: the handshake hangs until ``close()`` stops it."""

    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = RedisChatHistoryStore(f"redis://127.0.0.1:{port}/0", timeout=30.0)
        try:
            read = asyncio.ensure_future(store.read("k"))
            await asyncio.sleep(0.2)
            pool = await store._clients.get()
            connecting = pool._connecting
            assert accepted and connecting is not None and not connecting.done()
            await store.close()
            await asyncio.sleep(0)
            assert connecting.cancelled() and pool._link is None and pool._open == set()
            read.cancel()
        finally:
            server.close()
            for writer in accepted:
                writer.close()

    asyncio.run(main())
