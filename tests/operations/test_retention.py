"""Retention on every store, with a clock the test moves: exactly what is due is deleted."""

from __future__ import annotations

import asyncio

import httpx

from chatlab.service import ServiceSettings, start_service
from chatlab.stores import open_store

DAY = 86_400.0
MESSAGE = b'{"role":"user","contents":[]}'


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_sweep_deletes_exactly_what_is_due(store_url) -> None:
    async def scenario() -> None:
        import time

        store = open_store(store_url)
        clock = Clock(time.time())  # Redis also sets real expiries from it: they must lie ahead
        store.clock, store.retention = clock, 30 * DAY
        try:
            await store.append("old", [MESSAGE])  # day 0
            await store.replace("replaced", [MESSAGE])  # day 0, then written again on day 20
            await store.append("appended", [MESSAGE])  # day 0, then appended on day 20
            clock.now += 20 * DAY
            await store.replace("replaced", [MESSAGE, MESSAGE])
            await store.append("appended", [MESSAGE])
            await store.append("new", [MESSAGE])
            assert await store.sweep() == 0  # nothing is 30 days old yet
            clock.now += 10 * DAY  # day 30: "old" was last written exactly 30 days ago
            assert await store.sweep() == 1
            assert [s.conversation_key for s in await store.summaries()] == ["appended", "new", "replaced"]
            assert (await store.read("old")).version == "0"
            created = {s.conversation_key: (s.created_at, s.updated_at) for s in await store.summaries()}
            assert created["appended"] == (clock.now - 30 * DAY, clock.now - 10 * DAY)
            clock.now += 20 * DAY  # day 50: everything written on day 20 is due
            assert await store.sweep() == 3
            assert await store.summaries() == []
            await store.append("old", [MESSAGE])  # a deleted key starts again
            assert (await store.read("old")).messages == [MESSAGE]
        finally:
            await store.close()

    asyncio.run(scenario())


def test_redis_keys_expire_with_the_retention_refreshed_on_write(redis_url) -> None:
    import time

    import redis

    async def scenario() -> None:
        store = open_store(redis_url)
        clock = Clock(time.time())
        store.clock, store.retention = clock, 30 * DAY
        await store.append("k", [MESSAGE])
        clock.now += DAY
        await store.append("k", [MESSAGE])
        await store.close()
        return store

    store = asyncio.run(scenario())
    client = redis.Redis.from_url(redis_url.split("?")[0])
    try:
        expiry = client.pexpiretime(f"{store.prefix}{{0}}:messages:k") / 1000
        assert abs(expiry - (time.time() + 31 * DAY)) < 60
        for kind in ("version", "times"):
            assert client.pexpiretime(f"{store.prefix}{{0}}:{kind}:k") == client.pexpiretime(
                f"{store.prefix}{{0}}:messages:k"
            )
    finally:
        client.close()


def test_the_service_sweeps_with_its_retention_setting(tmp_path) -> None:
    import time

    store = open_store(f"sqlite:///{tmp_path / 'h.db'}")
    clock = Clock(time.time())
    store.clock = clock
    server = start_service(store=store, settings=ServiceSettings(retention="1s"))
    try:
        with httpx.Client(base_url=server.url) as http:
            http.post("/chat-history/a", json={"messages": []})
            http.post("/chat-history/b", json={"messages": [{"role": "user", "contents": []}]})
            listed = http.get("/chat-history").json()
            assert [c["conversationKey"] for c in listed] == ["b"]
            assert listed[0]["createdAt"].endswith("Z") and listed[0]["updatedAt"] == listed[0]["createdAt"]
            clock.now += 2
            deadline = time.monotonic() + 30
            while http.get("/chat-history").json() and time.monotonic() < deadline:
                time.sleep(0.05)  # the sweeper runs every 0.1 s with a 1 s retention (the clock is the test's)
            assert http.get("/chat-history").json() == []
    finally:
        server.stop()
