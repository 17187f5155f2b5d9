"""How long other requests wait while the service does its largest jobs: ``GET /`` timed alone, then
while a client repeats the job, each on a service of its own. The client repeating the job runs in a process of its
own: as a thread beside the probe, its own garbage collections held the probe too, and were counted as the service's.

* **the worst body**: one request may carry 8 MiB (``--max-body-bytes``' default) of about
  500,000 tiny content items; ``chatlab serve`` on the in-memory store takes ``PUT``s of it.
* **the list**: ``GET /chat-history`` of a service holding 100,000 conversations (``--conversations``),
  in-memory, each of one turn; besides the stall, the list's time and size.

Nothing is asserted: the machine may be shared, the figures are printed for a person to read.
"""

from __future__ import annotations

import gc
import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import httpx

from .config import BenchConfig
from .servers import ServerProcess

#: ``--max-body-bytes``' default, given to the server explicitly so the environment cannot change it.
MAX_BODY_BYTES = 8 * 1024 * 1024
_ITEM = b'{"$type":"text"}'
_PROBE_INTERVAL = 0.005


def worst_body(max_body_bytes: int = MAX_BODY_BYTES) -> tuple[bytes, int]:
    """The largest body within ``max_body_bytes``: one message of as many content items as fit, and how many."""
    head = b'{"messages":[{"role":"user","contents":['
    tail = b"]}]}"
    count = (max_body_bytes - len(head) - len(tail) + 1) // (len(_ITEM) + 1)
    return head + b",".join([_ITEM] * count) + tail, count


@dataclass
class Latencies:
    """Round trips, in seconds."""

    seconds: list[float]

    def ms(self) -> tuple[float, float, float]:
        """p50, p99 and the longest, in milliseconds."""
        ms = sorted(s * 1000 for s in self.seconds)
        if not ms:
            return (float("nan"),) * 3
        return statistics.median(ms), ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))], ms[-1]

    def row(self, label: str, note: str = "") -> str:
        """A line of the stall table: ``label``, p50, p99, the longest and the number of round trips, ``note``."""
        p50, p99, top = self.ms()
        return f"  {label:<28}{p50:>8.2f}{p99:>9.2f}{top:>9.2f}{len(self.seconds):>10,}  {note}".rstrip()


@dataclass
class StallRow:
    """``GET /`` alone and while the job repeats, and how long each job took (and its answer's bytes)."""

    job: str
    alone: Latencies
    loaded: Latencies
    took: list[float]
    size: int

    @property
    def longest_wait_ms(self) -> float:
        """The longest a ``GET /`` waited while the job repeated, in milliseconds (what the stall goal bounds)."""
        return self.loaded.ms()[2]


def probe(client: httpx.Client, until: Future[tuple[list[float], int]] | None, count: int) -> Latencies:
    """Time ``GET /`` every few milliseconds: ``count`` times, or until ``until`` is done. This process's objects are
    frozen meanwhile (:func:`gc.freeze`): a full collection here would walk them all, and its pause be counted as
    the service's."""
    seconds: list[float] = []
    gc.collect()
    gc.freeze()
    try:
        while (until is None and len(seconds) < count) or (until is not None and not until.done()):
            start = time.perf_counter()
            client.get("/").raise_for_status()
            seconds.append(time.perf_counter() - start)
            time.sleep(_PROBE_INTERVAL)
    finally:
        gc.unfreeze()
    return Latencies(seconds)


def under(
    url: str, job: Callable[[httpx.Client], int], times: int, probes: int
) -> tuple[Latencies, Latencies, list[float], int]:
    """``GET /`` alone, then while ``job`` (a module's function) runs ``times`` times one after the other in a
    process of its own; the jobs' seconds and size."""
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: forking a process with threads is unsafe
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool, httpx.Client(base_url=url, timeout=60) as client:
        pool.submit(repeat, url, _nothing, 0).result()  # the process started before the probe, not during it
        alone = probe(client, None, probes)
        running = pool.submit(repeat, url, job, times)
        loaded = probe(client, running, 0)
    took, size = running.result()  # re-raises what the job raised
    return alone, loaded, took, size


def repeat(url: str, job: Callable[[httpx.Client], int], times: int) -> tuple[list[float], int]:
    """Run ``job`` ``times`` times one after the other against ``url``: each one's seconds, and the last one's size."""
    took: list[float] = []
    size = 0
    with httpx.Client(base_url=url, timeout=300) as client:
        for _ in range(times):
            start = time.perf_counter()
            size = job(client)
            took.append(time.perf_counter() - start)
    return took, size


def _nothing(client: httpx.Client) -> int:
    """A job that sends nothing (it starts the job's process)."""
    return 0


def put_worst_body(client: httpx.Client) -> int:
    """One ``PUT`` of :func:`worst_body`; its size."""
    raw, _ = worst_body()
    client.put("/chat-history/stall", content=raw, headers={"content-type": "application/json"}).raise_for_status()
    return len(raw)


def list_conversations(client: httpx.Client) -> int:
    """One unpaged ``GET /chat-history``, read as it streams; its size."""
    size = 0
    with client.stream("GET", "/chat-history") as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            size += len(chunk)
    return size


def print_stall_header(conversations: int) -> None:
    """What the stall table measures, and its column heads."""
    print(
        "\nStalls: GET / alone, then while a client repeats a large job (each on a service of its own): PUT of the "
        f"worst body the default limits allow; GET /chat-history of {conversations:,} conversations (in-memory)"
    )
    print(f"  {'GET / ...':<28}{'p50 ms':>8}{'p99 ms':>9}{'max ms':>9}{'requests':>10}", flush=True)


def print_stall_rows(row: StallRow) -> None:
    """``GET /`` alone and during the job, with the job's time and size."""
    print(row.alone.row(f"alone ({row.job})"))
    each = f"{statistics.median(row.took):.3f} s" if row.took else "n/a"
    note = f"({len(row.took)} jobs of {each} each, {row.size:,} bytes)"
    print(row.loaded.row(f"during {row.job}", note), flush=True)


def bench_stall(config: BenchConfig) -> list[StallRow]:
    """Both jobs, measured and printed."""
    print_stall_header(config.conversations)
    rows: list[StallRow] = []
    probes = 100 if config.quick else 500
    body_args = ["--max-body-bytes", str(MAX_BODY_BYTES)]
    with ServerProcess("service", config.stack, child=body_args) as service:
        rows.append(StallRow("worst body", *under(service.url, put_worst_body, 2 if config.quick else 10, probes)))
    print_stall_rows(rows[-1])
    listing = ["--conversations", str(config.conversations)]
    with ServerProcess("listing", config.stack, child=listing) as service:
        rows.append(StallRow("list", *under(service.url, list_conversations, 3 if config.quick else 10, probes)))
    print_stall_rows(rows[-1])
    return rows
