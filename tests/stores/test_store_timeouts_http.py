"""A database that stops answering costs a request at most the store timeout: 503 + Retry-After, then recovery.

PostgreSQL and Redis sit behind a TCP proxy that the tests pause (connections stay open, nothing comes
back: a frozen server or network); SQLite's wait is for a write lock that another connection holds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from chatlab.service import ServiceSettings, start_service
from chatlab.stores.sqlite import path_from_url
from tests.faults import PausableProxy

SETTINGS = ServiceSettings(store_timeout=1.0)


def message(text: str) -> dict[str, object]:
    return {"role": "user", "contents": [{"$type": "text", "text": text}]}


def through(url: str, proxy: PausableProxy) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))


@pytest.fixture(params=["postgres", "redis"])
def proxied(request: pytest.FixtureRequest) -> Iterator[tuple[PausableProxy, str]]:
    """A PausableProxy in front of the real server, and an isolated store URL that goes through it."""
    url = request.getfixturevalue(f"{request.param}_url")
    parts = urlsplit(url)
    proxy = PausableProxy(parts.port or (5432 if request.param == "postgres" else 6379))
    try:
        yield proxy, through(url, proxy)
    finally:
        proxy.close()


def assert_store_timeout(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert int(response.headers["retry-after"]) >= 1
    assert "within 1 s" in response.json()["detail"]


def recovered(client: httpx.Client, attempts: int = 120) -> bool:
    """Whether a read succeeds again within a bounded number of tries (the pool reconnects with backoff)."""
    for _ in range(attempts):
        if client.get("/chat-history").status_code == 200:
            return True
        time.sleep(0.5)
    return False


def test_a_frozen_database_answers_503_in_time_and_the_service_recovers(proxied: tuple[PausableProxy, str]) -> None:
    proxy, url = proxied
    server = start_service(store=url, settings=SETTINGS)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            assert client.post("/chat-history/k", json={"messages": [message("before")]}).status_code == 202
            proxy.pause()
            for method, path, body in [
                ("GET", "/chat-history/k", None),
                ("GET", "/chat-history", None),
                ("HEAD", "/chat-history/k", None),
                ("POST", "/chat-history/k", {"messages": [message("during")]}),
                ("PUT", "/chat-history/other", {"messages": [message("during")]}),
                ("DELETE", "/chat-history/other", None),
            ]:
                response = client.request(method, path, json=body)
                if method == "HEAD":
                    assert response.status_code == 503 and response.headers["retry-after"]
                else:
                    assert_store_timeout(response)
            proxy.resume()
            assert recovered(client), "the service did not recover after the database came back"
            # the frozen connections were discarded: had one been reused, it would read a stale answer
            first = client.get("/chat-history/k").json()
            assert first[0] == message("before")
            assert client.post("/chat-history/k", json={"messages": [message("after")]}).status_code == 202
            after = client.get("/chat-history/k")
            assert after.json() == [*first, message("after")]
            assert after.headers["x-message-count"] == str(len(first) + 1)
    finally:
        server.stop()


def test_sqlite_waits_for_another_connection_s_write_lock_only_until_the_timeout(sqlite_url: str) -> None:
    server = start_service(store=sqlite_url, settings=SETTINGS)
    holder = None
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            assert client.post("/chat-history/k", json={"messages": [message("before")]}).status_code == 202
            holder = sqlite3.connect(path_from_url(sqlite_url), isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock

            def write(i: int) -> httpx.Response:
                with httpx.Client(base_url=server.url, timeout=60) as own:
                    return own.post("/chat-history/k", json={"messages": [message(f"w{i}")]})

            with ThreadPoolExecutor(8) as pool:  # writers queue behind each other too: none waits past its timeout
                responses = list(pool.map(write, range(8)))
            for response in responses:
                assert response.status_code == 503, response.text
                assert response.headers["retry-after"] and response.json()["status"] == 503
            assert client.get("/chat-history/k").json() == [message("before")]  # reads go on; nothing written
            holder.execute("ROLLBACK")
            assert client.post("/chat-history/k", json={"messages": [message("after")]}).status_code == 202
            assert client.get("/chat-history/k").json() == [message("before"), message("after")]
    finally:
        if holder is not None:
            holder.close()
        server.stop()


def test_postgres_discards_the_frozen_connection_instead_of_pooling_it(postgres_url: str) -> None:
    from chatlab.stores import StoreError
    from chatlab.stores.postgres import PostgresChatHistoryStore

    parts = urlsplit(postgres_url)
    proxy = PausableProxy(parts.port or 5432)

    async def main() -> None:
        store = PostgresChatHistoryStore(through(postgres_url, proxy), timeout=1.0)
        try:
            await store.append("k", [b'{"n":1}'])
            proxy.pause()
            with pytest.raises(StoreError, match="did not answer within 1 s"):
                await store.read("k")
            pool = await store.connections._pools.get()
            assert pool.get_idle_size() == 0  # given back terminated: not kept for reuse
            proxy.resume()
            for _ in range(120):  # bounded: the pool reconnects with backoff
                try:
                    assert (await store.read("k")).messages == [b'{"n":1}']
                    return
                except StoreError:
                    await asyncio.sleep(0.5)
            pytest.fail("the store did not recover after the database came back")
        finally:
            proxy.resume()
            await store.close()

    try:
        asyncio.run(main())
    finally:
        proxy.close()
