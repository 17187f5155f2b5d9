"""The listing's figure: one page of 100 summaries from a store of 1,000 conversations and from one of
100,000 (``--quick``: 20,000; ``--listing``), on every store, and the same page over HTTP.

A page is ``store.summaries(after=KEY, limit=100)``, KEY one of a few keys in the middle of the store.
The goal (the conversations issue): a page costs about the same however many conversations the store
holds, since every store reads it from an index ordered by key, never the whole list. Over HTTP the page
is ``GET /chat-history?limit=100&after=KEY`` to ``chatlab serve`` on the same store (for the in-memory
store, a service child holding as many conversations, of one turn each, under the same keys).

Each store is filled through its own interface, ``restore`` of 1,000 conversations of one tiny message at
a time, in a place of its own (a SQLite file, a PostgreSQL schema, a Redis key prefix) removed afterwards.
Both sizes are timed in the same passes, one after the other (in alternating order): the ratio is the
median of the passes' ratios, so a noisy moment of a shared machine hits both sides alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from chatlab.stores import ChatHistoryStore, open_store
from chatlab.stores.base import ConversationRecord, new_version

from .config import PAGE, BenchConfig
from .servers import ServerProcess
from .targets import drop_postgres, drop_redis, isolation_name, with_query

#: keys a page starts after, around the middle of the store
KEYS = 5
#: conversations per ``restore`` call while filling
FILL_BATCH = 1_000
#: one tiny message: every conversation holds one
TINY = b'{"role":"user","contents":[{"$type":"text","text":"hi"}]}'
#: seconds a store may take for one operation (a batch of the fill on a busy machine)
STORE_TIMEOUT = 120.0


def key(i: int) -> str:
    """The ``i``-th conversation's key (as the listing service child names them): key order is ``i``'s order."""
    return f"user-{i:07d}"


def middle(conversations: int) -> list[int]:
    """The positions of the keys a page starts after: :data:`KEYS` around the middle, each with a full page after it."""
    step = max(1, conversations // 50)
    last = conversations - PAGE - 1
    return sorted({min(last, conversations // 2 + (j - KEYS // 2) * step) for j in range(KEYS)})


def expected_page(position: int) -> list[str]:
    """The keys of the page after the key at ``position``."""
    return [key(i) for i in range(position + 1, position + 1 + PAGE)]


@dataclass
class PageTimes:
    """A page's seconds at the smaller and the larger store, one median per pass each."""

    small: list[float] = field(default_factory=list)
    large: list[float] = field(default_factory=list)

    def add_pass(self, small: float, large: float) -> None:
        self.small.append(small)
        self.large.append(large)

    @property
    def ratios(self) -> list[float]:
        """Each pass's page at the larger store over its page at the smaller."""
        return [large / small for small, large in zip(self.small, self.large, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def ms(self) -> tuple[float, float]:
        """The page's milliseconds at the smaller and at the larger store, median of the passes."""
        return statistics.median(self.small) * 1000, statistics.median(self.large) * 1000


@dataclass
class ListingRow:
    """One store's figures: the page read from the store, and over HTTP (``None`` with ``note`` saying why not)."""

    store: str
    sizes: tuple[int, int]
    direct: PageTimes
    http: PageTimes | None = None
    note: str = ""


@dataclass
class Place:
    """Where one store of a size lives, and what removes it."""

    url: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)


@contextlib.contextmanager
def places(config: BenchConfig, store: str, tmp: Path) -> Iterator[tuple[Place, Place]]:
    """A place of its own for each size of ``store`` (removed afterwards)."""
    name = isolation_name()
    made: list[Place] = []
    for size in config.listing:
        if store == "memory":
            made.append(Place("memory://"))
        elif store == "sqlite":
            path = tmp / f"listing-{size}-{len(made)}.db"
            files = [path.with_name(path.name + suffix) for suffix in ("", "-wal", "-shm")]
            made.append(Place(f"sqlite:///{path}", [functools.partial(f.unlink, missing_ok=True) for f in files]))
        elif store == "postgresql" and config.postgres_url:
            schema = f"{name}_list{len(made)}"
            cleanup = functools.partial(drop_postgres, config.postgres_url, schema)
            made.append(Place(with_query(config.postgres_url, schema=schema), [cleanup]))
        elif store == "redis" and config.redis_url:
            prefix = f"{name}_list{len(made)}:"
            cleanup = functools.partial(drop_redis, config.redis_url, prefix)
            made.append(Place(with_query(config.redis_url, prefix=prefix), [cleanup]))
        else:
            raise ValueError(f"no place for the listing's {store} store (a URL missing?)")
    try:
        yield made[0], made[1]
    finally:
        for place in made:
            for clean in place.cleanup:
                with contextlib.suppress(Exception):
                    clean()


async def fill(store: ChatHistoryStore, conversations: int) -> None:
    """``conversations`` conversations of one tiny message, through ``restore``, :data:`FILL_BATCH` at a time."""
    now = time.time()
    for start in range(0, conversations, FILL_BATCH):
        await store.restore(
            [
                ConversationRecord(key(i), [TINY], new_version(1), now, now)
                for i in range(start, min(conversations, start + FILL_BATCH))
            ]
        )


async def timed_pages(page: Callable[[str], Awaitable[object]], positions: Sequence[int], rounds: int) -> float:
    """The median seconds of ``page`` after each key at ``positions``, ``rounds`` times over."""
    seconds: list[float] = []
    for _ in range(rounds):
        for position in positions:
            start = time.perf_counter()
            await page(key(position))
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


async def passes(
    pages: tuple[Callable[[str], Awaitable[object]], Callable[[str], Awaitable[object]]],
    sizes: tuple[int, int],
    config: BenchConfig,
) -> PageTimes:
    """Both sizes' pages timed in ``config.repeats`` passes, the smaller first in every other pass."""
    times = PageTimes()
    rounds = rounds_per_pass(config)
    for n in range(config.repeats):
        order = (0, 1) if n % 2 == 0 else (1, 0)
        took = [0.0, 0.0]
        for i in order:
            took[i] = await timed_pages(pages[i], middle(sizes[i]), rounds)
        times.add_pass(took[0], took[1])
    return times


def rounds_per_pass(config: BenchConfig) -> int:
    """How many times a pass reads the page after each key."""
    return 10 if config.quick else 40


async def direct_pages(config: BenchConfig, store: str, urls: tuple[str, str]) -> PageTimes:
    """Fill the two stores, check each answers the right page, and time ``summaries(after=KEY, limit=100)``."""
    stores = [open_store(url, timeout=STORE_TIMEOUT) for url in urls]
    try:
        for each, size in zip(stores, config.listing, strict=True):
            await fill(each, size)
            for position in middle(size):
                page = await each.summaries(after=key(position), limit=PAGE)
                if [s.conversation_key for s in page] != expected_page(position):
                    raise RuntimeError(
                        f"the {store} store's summaries(after={key(position)!r}, limit={PAGE}) at {size:,} "
                        f"conversations answered {len(page)} summaries, not the {PAGE} keys after it"
                    )

        def page_of(each: ChatHistoryStore) -> Callable[[str], Awaitable[object]]:
            return lambda after: each.summaries(after=after, limit=PAGE)

        return await passes((page_of(stores[0]), page_of(stores[1])), config.listing, config)
    finally:
        for each in stores:
            await each.close()


def http_page(client: httpx.AsyncClient) -> Callable[[str], Awaitable[object]]:
    async def page(after: str) -> bytes:
        response = await client.get("/chat-history", params={"limit": str(PAGE), "after": after})
        response.raise_for_status()
        return response.content

    return page


async def http_pages(config: BenchConfig, urls: tuple[str, str]) -> tuple[PageTimes | None, str]:
    """The page over HTTP from the two services, or ``None`` and why not (a service that does not page)."""
    async with (
        httpx.AsyncClient(base_url=urls[0], timeout=60) as small,
        httpx.AsyncClient(base_url=urls[1], timeout=60) as large,
    ):
        for client, size in ((small, config.listing[0]), (large, config.listing[1])):
            for position in middle(size):
                response = await client.get("/chat-history", params={"limit": str(PAGE), "after": key(position)})
                response.raise_for_status()
                keys = [row["conversationKey"] for row in response.json()]
                if keys != expected_page(position):
                    return None, f"HTTP: the service answered {len(keys):,} conversations, not the page (no paging)"
        return await passes((http_page(small), http_page(large)), config.listing, config), ""


def http_figure(config: BenchConfig, store: str, urls: tuple[str, str]) -> tuple[PageTimes | None, str]:
    """The page over HTTP, from ``chatlab serve`` on each store (in memory: a listing child as large)."""
    with contextlib.ExitStack() as servers_stack:
        servers = []
        for url, size in zip(urls, config.listing, strict=True):
            if store == "memory":
                server = ServerProcess("listing", config.stack, child=["--conversations", str(size)])
            else:
                server = ServerProcess("service", config.stack, store=url)
            servers.append(servers_stack.enter_context(server))
        return asyncio.run(http_pages(config, (servers[0].url, servers[1].url)))


def bench_listing(config: BenchConfig, stores: Sequence[str], tmp: Path) -> list[ListingRow]:
    """Each store's page at both sizes, directly and over HTTP, measured and printed."""
    from .report import print_listing_header, print_listing_row

    print_listing_header(config)
    rows: list[ListingRow] = []
    for store in stores:
        with places(config, store, tmp) as (small, large):
            urls = (small.url, large.url)
            direct = asyncio.run(direct_pages(config, store, urls))
            http, note = http_figure(config, store, urls)
        rows.append(ListingRow(store, config.listing, direct, http, note))
        print_listing_row(rows[-1])
    return rows
