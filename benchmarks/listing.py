"""The listing's figure: one page of 100 summaries from a store of 1,000 conversations and from one of
100,000 (``--quick``: 20,000; ``--listing``), on every store, and the same page over HTTP.

A page is ``store.summaries(after=KEY, limit=100)``, KEY one of a few keys in the middle of the store.
The goal (the conversations issue): a page costs about the same however many conversations the store
holds, since every store reads it from an index ordered by key, never the whole list. Over HTTP the page
is ``GET /chat-history?limit=100&after=KEY`` to ``chatlab serve`` on the same store (for the in-memory
store, a service child holding as many conversations, of one turn each, under the same keys).

Beside them, the page over HTTP from a store that holds the smaller store's conversations and as many namespaced
ones as the larger store holds (100,000 in the full run; keys of the form ``namespace/...`` as a service with API keys
writes them), one group between every two plain keys: a keyless service reads its page from the store's index of
plain keys, in one store call, so the page should cost no more for them.

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
from .workload import conversation_key as key
from .workload import namespaced_key

#: keys a page starts after, around the middle of the store
KEYS = 5
#: conversations per ``restore`` call while filling
FILL_BATCH = 1_000
#: one tiny message: every conversation holds one
TINY = b'{"role":"user","contents":[{"$type":"text","text":"hi"}]}'
#: seconds a store may take for one operation (a batch of the fill on a busy machine)
STORE_TIMEOUT = 120.0


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
        """One pass: the page's seconds at the smaller and at the larger store."""
        self.small.append(small)
        self.large.append(large)

    @property
    def ratios(self) -> list[float]:
        """Each pass's page at the larger store over its page at the smaller."""
        return [large / small for small, large in zip(self.small, self.large, strict=True)]

    @property
    def ratio(self) -> float:
        """The median of the passes' ratios."""
        return statistics.median(self.ratios)

    def ms(self) -> tuple[float, float]:
        """The page's milliseconds at the smaller and at the larger store, median of the passes."""
        return statistics.median(self.small) * 1000, statistics.median(self.large) * 1000


@dataclass
class ListingRow:
    """One store's figures: the page read from the store, and over HTTP (``None`` with ``note`` saying why not);
    ``beside``: over HTTP, the page at the smaller store against the page beside ``sizes[1]`` namespaced ones."""

    store: str
    sizes: tuple[int, int]
    direct: PageTimes
    http: PageTimes | None = None
    note: str = ""
    beside: PageTimes | None = None


@dataclass
class Place:
    """Where one store of a size lives, and what removes it."""

    url: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)


@contextlib.contextmanager
def places(config: BenchConfig, store: str, tmp: Path) -> Iterator[tuple[Place, Place, Place]]:
    """A place of its own for each size of ``store``, and one for the store crowded with namespaced conversations
    (removed afterwards)."""
    name = isolation_name()
    made: list[Place] = []
    for label in ("small", "large", "crowded"):
        if store == "memory":
            made.append(Place("memory://"))
        elif store == "sqlite":
            path = tmp / f"listing-{label}-{len(made)}.db"
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
        yield made[0], made[1], made[2]
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


async def fill_namespaced(store: ChatHistoryStore, plain: int, namespaced: int) -> None:
    """``namespaced`` conversations of one tiny message beside ``plain`` ones (:func:`namespaced_key`)."""
    now = time.time()
    for start in range(0, namespaced, FILL_BATCH):
        await store.restore(
            [
                ConversationRecord(namespaced_key(n, plain), [TINY], new_version(1), now, now)
                for n in range(start, min(namespaced, start + FILL_BATCH))
            ]
        )


async def fill_crowded(url: str, config: BenchConfig) -> None:
    """The crowded store: the smaller store's conversations and the larger store's count of namespaced ones."""
    plain, namespaced = config.listing
    store = open_store(url, timeout=STORE_TIMEOUT)
    try:
        await fill(store, plain)
        await fill_namespaced(store, plain, namespaced)
    finally:
        await store.close()


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
    """A page of ``GET /chat-history`` after a key, from the service ``client`` talks to."""

    async def page(after: str) -> bytes:
        response = await client.get("/chat-history", params={"limit": str(PAGE), "after": after})
        response.raise_for_status()
        return response.content

    return page


async def pages_answered(client: httpx.AsyncClient, size: int) -> str:
    """``""`` when the service answers the page after each middle key of ``size`` plain conversations, else why not."""
    for position in middle(size):
        response = await client.get("/chat-history", params={"limit": str(PAGE), "after": key(position)})
        response.raise_for_status()
        keys = [row["conversationKey"] for row in response.json()]
        if keys != expected_page(position):
            return f"HTTP: the service answered {len(keys):,} conversations, not the page"
    return ""


async def http_pages(config: BenchConfig, urls: tuple[str, str, str]) -> tuple[PageTimes | None, PageTimes | None, str]:
    """The page over HTTP from the small and the large service, and from the small against the crowded one; or
    ``None`` and why not (a service that does not page, or does not skip the namespaced conversations)."""
    small_size, large_size = config.listing
    async with (
        httpx.AsyncClient(base_url=urls[0], timeout=60) as small,
        httpx.AsyncClient(base_url=urls[1], timeout=60) as large,
        httpx.AsyncClient(base_url=urls[2], timeout=60) as crowded,
    ):
        why_not = await pages_answered(small, small_size) or await pages_answered(large, large_size)
        if why_not:
            return None, None, why_not + " (no paging)"
        sizes = await passes((http_page(small), http_page(large)), config.listing, config)
        why_not = await pages_answered(crowded, small_size)
        if why_not:
            return sizes, None, why_not + " beside namespaced conversations"
        beside = await passes((http_page(small), http_page(crowded)), (small_size, small_size), config)
        return sizes, beside, ""


def http_figure(
    config: BenchConfig, store: str, urls: tuple[str, str, str]
) -> tuple[PageTimes | None, PageTimes | None, str]:
    """The pages over HTTP, from ``chatlab serve`` on each store (in memory: a listing child as large)."""
    small, large = config.listing
    children = (
        ["--conversations", str(small)],
        ["--conversations", str(large)],
        ["--conversations", str(small), "--namespaced", str(large)],
    )
    with contextlib.ExitStack() as servers_stack:
        servers = []
        for url, child in zip(urls, children, strict=True):
            if store == "memory":
                server = ServerProcess("listing", config.stack, child=child)
            else:
                server = ServerProcess("service", config.stack, store=url)
            servers.append(servers_stack.enter_context(server))
        return asyncio.run(http_pages(config, (servers[0].url, servers[1].url, servers[2].url)))


def print_listing_header(config: BenchConfig) -> None:
    """What the listing table measures, and its column heads."""
    lo, hi = config.listing
    full_lo, full_hi = BenchConfig().listing
    quick = f" (quick mode; the full run: {full_lo:,} and {full_hi:,})" if config.quick else ""
    print(
        f"\nListing: one page of {PAGE} summaries, after one of {KEYS} keys in the middle, from a store of {lo:,} "
        f"conversations and from one of {hi:,}{quick}. store = `store.summaries(after=KEY, limit={PAGE})`; "
        f"HTTP = `GET /chat-history?limit={PAGE}&after=KEY` to the service on that store; beside = the same page "
        f"over HTTP from a store of {lo:,} conversations and {hi:,} namespaced ones between them"
    )
    print(
        f"ms: a page's time, median of the passes (each the median of its pages); ratio: the page at {hi:,} over "
        f"the page at {lo:,} (beside: the page beside the namespaced ones over the page at {lo:,}), median over "
        f"{config.repeats} passes"
    )
    at_lo = f"ms at {lo:,}"
    at_hi = f"ms at {hi:,}"
    print(
        f"{'store':<11} {at_lo:>14} {at_hi:>14} {'ratio':>7} | {'HTTP ' + at_lo:>14} {at_hi:>14} {'ratio':>7} | "
        f"{'ms beside':>10} {'ratio':>7}",
        flush=True,
    )


def listing_line(row: ListingRow) -> str:
    """One row of the listing table."""
    lo, hi = row.direct.ms()
    line = f"{row.store:<11} {lo:>14.3f} {hi:>14.3f} {row.direct.ratio:>6.2f}x | "
    if row.http is None:
        return line + row.note
    http_lo, http_hi = row.http.ms()
    line += f"{http_lo:>14.3f} {http_hi:>14.3f} {row.http.ratio:>6.2f}x | "
    if row.beside is None:
        return line + row.note
    return line + f"{row.beside.ms()[1]:>10.3f} {row.beside.ratio:>6.2f}x"


def bench_listing(config: BenchConfig, stores: Sequence[str], tmp: Path) -> list[ListingRow]:
    """Each store's page at both sizes, directly and over HTTP, and beside the namespaced ones; measured and
    printed."""
    print_listing_header(config)
    rows: list[ListingRow] = []
    for store in stores:
        with places(config, store, tmp) as (small, large, crowded):
            urls = (small.url, large.url, crowded.url)
            direct = asyncio.run(direct_pages(config, store, (small.url, large.url)))
            if store != "memory":
                asyncio.run(fill_crowded(crowded.url, config))
            http, beside, note = http_figure(config, store, urls)
        rows.append(ListingRow(store, config.listing, direct, http, note, beside))
        print(listing_line(rows[-1]), flush=True)
    return rows
