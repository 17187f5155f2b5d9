"""The provider's figure: the time and HTTP bytes of one agent turn, by the length of the history.

One turn is what the provider does around a run: load the history before it, append the
run's 4 messages after it. Every length is measured in the same rounds, one turn of each
length after another (in alternating order), so "vs 10" is the median of ratios of turns
made moments apart, not of medians taken minutes apart.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .config import BenchConfig
from .servers import ServerProcess
from .targets import StoreTarget
from .workload import APPEND_MESSAGES, body, sample_messages, sample_turn

INCREMENTAL_TURNS_FACTOR = 4
MODES = ("incremental", "full")


@dataclass
class TurnRow:
    """A turn's median time and bytes at one history length, and its median ratio to the shortest history's."""

    store: str
    length: int
    mode: str
    ms: float
    bytes: int
    vs_shortest: float


class _CountingTransport(httpx.AsyncBaseTransport):
    """Counts the HTTP bytes of requests and responses (bodies + start lines + headers)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bytes = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        content = await response.aread()
        self.bytes += (
            len(request.content) + _header_bytes(request.headers) + len(request.method) + len(request.url.raw_path) + 12
        )
        self.bytes += len(content) + _header_bytes(response.headers) + 17 + len(response.reason_phrase or "")
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=content,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _header_bytes(headers: httpx.Headers) -> int:
    return sum(len(k) + len(v) + 4 for k, v in headers.raw) + 2


async def _fill(client: httpx.AsyncClient, url: str, key: str, count: int) -> None:
    done = 0
    while done < count:
        n = min(1_000, count - done)
        batch = body(sample_messages(n, start=done // 4 + 10_000))
        response = await client.post(
            f"{url}/chat-history/{key}", content=batch, headers={"content-type": "application/json"}
        )
        response.raise_for_status()
        done += n


class _Session:
    """One conversation of ``length`` messages and the provider that runs turns on it."""

    def __init__(self, client: httpx.AsyncClient, url: str, length: int, mode: str) -> None:
        from chatlab import RemoteChatHistoryProvider
        from chatlab.client.provider import KEY_FIELD

        self.length = length
        self.stored = length
        self.key = f"bench-turns-{length}-{mode}-{uuid.uuid4().hex[:8]}"
        self.provider = RemoteChatHistoryProvider(url, http_client=client, incremental=mode == "incremental")
        self.state: dict[str, Any] = {KEY_FIELD: self.key}
        self.times: list[float] = []
        self.sizes: list[int] = []

    async def turn(self, transport: _CountingTransport, number: int) -> float:
        from chatlab import messages_from_meai

        new = messages_from_meai(sample_turn(50_000 + number))
        gc.collect()
        transport.bytes = 0
        start = time.perf_counter()
        history = await self.provider.get_messages(None, state=self.state)
        await self.provider.save_messages(None, new, state=self.state)
        elapsed = time.perf_counter() - start
        if len(history) != self.stored:
            raise RuntimeError(f"the provider loaded {len(history)} messages, expected {self.stored}")
        self.stored += len(new)
        self.times.append(elapsed)
        self.sizes.append(transport.bytes)
        return elapsed


async def _turns(store: str, url: str, lengths: tuple[int, ...], turns: int) -> list[TurnRow]:
    transport = _CountingTransport()
    rows: list[TurnRow] = []
    async with httpx.AsyncClient(transport=transport, timeout=120) as client:
        for mode in MODES:
            sessions = [_Session(client, url, length, mode) for length in lengths]
            for s in sessions:
                await _fill(client, url, s.key, s.length)
                await s.provider.get_messages(None, state=s.state)  # the session's first run loads everything once
            ratios: dict[int, list[float]] = {s.length: [] for s in sessions}
            # incremental turns are cheap: take more of them, for a steadier median on a noisy machine
            for number in range(turns * INCREMENTAL_TURNS_FACTOR if mode == "incremental" else turns):
                order = sessions if number % 2 == 0 else sessions[::-1]
                took = {s.length: await s.turn(transport, number) for s in order}
                for length, seconds in took.items():
                    ratios[length].append(seconds / took[sessions[0].length])
            for s in sessions:
                await s.provider.aclose()
                ms = statistics.median(s.times) * 1000
                size = int(statistics.median(s.sizes))
                rows.append(TurnRow(store, s.length, mode, ms, size, statistics.median(ratios[s.length])))
    return rows


def print_turn_rows(rows: Sequence[TurnRow], *, first: bool) -> None:
    """The rows of one store's turns, after the column heads when ``first``."""
    lines: list[str] = []
    if first and rows:
        shortest = min(row.length for row in rows)
        lines.append(
            f"{'store':<11} {'history':>8} {'mode':<12} {'ms/turn':>9} {'bytes/turn':>11} {f'vs {shortest:,}':>8}"
        )
    for row in rows:
        lines.append(
            f"{row.store:<11} {row.length:>8,} {row.mode:<12} {row.ms:>9.2f} {row.bytes:>11,} {row.vs_shortest:>7.2f}x"
        )
    print("\n".join(lines), flush=True)


def bench_provider(config: BenchConfig, targets: list[StoreTarget]) -> list[TurnRow]:
    """Each store's turns at every length of ``config.lengths``; prints the table."""
    print(
        f"\nProvider: one turn = load the history before the run + append {APPEND_MESSAGES} messages after it "
        f"({config.turns * INCREMENTAL_TURNS_FACTOR} incremental / {config.turns} full turns per length after the "
        "session's first load, the lengths in turn; bytes = HTTP bodies + headers both ways; "
        f"vs {min(config.lengths):,} = median of the ratios of turns made one after the other)",
        flush=True,
    )
    rows: list[TurnRow] = []
    for target in targets:
        with ServerProcess("service", config.stack, store=target.url) as service:
            measured = asyncio.run(_turns(target.name, service.url, tuple(sorted(config.lengths)), config.turns))
        print_turn_rows(measured, first=not rows)
        rows += measured
    return rows
