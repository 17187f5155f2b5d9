"""The HTTP figures: requests per second of a read and an append, against the baseline and the ceiling.

For each store four servers run side by side on the same stack: the **service** (``chatlab serve``), the
**baseline** for that store (:mod:`benchmarks.baselines`: what a user would write instead), the **ceiling**
(:mod:`benchmarks.ceiling`: a bare Starlette app) and the **floor** (a bare FastAPI app made as the service's). Each
pass runs the four back to back, in alternating order, and each ratio is the median over the passes of one side's
rate over the other's in the same pass, so a noisy moment of a shared machine hits both sides of a ratio alike.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .config import BenchConfig
from .load import LoadGenerator, LoadResult, median_run
from .servers import ServerProcess
from .targets import StoreTarget
from .workload import APPEND_KEYS, APPEND_MESSAGES, READ_MESSAGES, append_body, body, read_answer, sample_messages

READ_PATH = "/chat-history/bench-read"
APPEND_PATH = "/chat-history/bench-append"
OPS = ("read", "append")
SIDES = ("service", "baseline", "ceiling", "floor")


@dataclass
class HttpRow:
    """One store's figures for one operation: each side's median run, and the service's ratios to the others."""

    store: str
    op: str
    runs: dict[str, list[LoadResult]] = field(default_factory=lambda: {side: [] for side in SIDES})
    #: the service's rate over the baseline's, and over the ceiling's, in each pass
    vs_baseline: list[float] = field(default_factory=list)
    vs_ceiling: list[float] = field(default_factory=list)
    #: the FastAPI floor's rate over the ceiling's, in each pass: the most a FastAPI service reaches here
    floor_vs_ceiling: list[float] = field(default_factory=list)
    #: each side's server CPU time per answered request (seconds), in each pass: steadier than the rate on a busy
    #: machine, since it does not count the time the server waited for a CPU
    cpu: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})

    def median(self, side: str) -> LoadResult:
        """``side``'s run of median throughput."""
        return median_run(self.runs[side])

    @property
    def baseline_ratio(self) -> float:
        """The service's rate over the baseline's: the median of the passes' ratios."""
        return statistics.median(self.vs_baseline) if self.vs_baseline else float("nan")

    @property
    def ceiling_ratio(self) -> float:
        """The service's rate over the ceiling's: the median of the passes' ratios."""
        return statistics.median(self.vs_ceiling) if self.vs_ceiling else float("nan")

    @property
    def floor_ratio(self) -> float:
        """The floor's rate over the ceiling's: the median of the passes' ratios."""
        return statistics.median(self.floor_vs_ceiling) if self.floor_vs_ceiling else float("nan")

    def p50_ms(self, side: str) -> float:
        """The median over the passes of ``side``'s median latency (ms)."""
        return statistics.median(run.p50_ms for run in self.runs[side]) if self.runs[side] else float("nan")

    def p99_ms(self, side: str) -> float:
        """The median over the passes of ``side``'s 99th-percentile latency (ms): the tail, from the rate's passes."""
        return statistics.median(run.p99_ms for run in self.runs[side]) if self.runs[side] else float("nan")

    def cpu_per_request(self, side: str) -> float:
        """The median over the passes of ``side``'s server CPU seconds per request."""
        return statistics.median(self.cpu[side]) if self.cpu[side] else float("nan")

    def add_pass(self, runs: dict[str, LoadResult], cpu: dict[str, float] | None = None) -> None:
        """One pass: each side's run, and (``cpu``) the CPU seconds its server used meanwhile."""
        for side in SIDES:
            self.runs[side].append(runs[side])
            if cpu is not None:
                self.cpu[side].append(ratio(cpu[side], runs[side].requests))
        service = runs["service"].rps
        self.vs_baseline.append(ratio(service, runs["baseline"].rps))
        self.vs_ceiling.append(ratio(service, runs["ceiling"].rps))
        self.floor_vs_ceiling.append(ratio(runs["floor"].rps, runs["ceiling"].rps))


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is 0 (a side that answered nothing)."""
    return a / b if b else float("nan")


@dataclass
class Load:
    """What one operation's load sends: a path, a body file (``None``: a ``GET``), how many conversations."""

    path: str
    body: Path | None
    keys: int


def pass_order(repeat: int) -> tuple[str, ...]:
    """The sides of pass ``repeat``: alternately forwards and backwards, so no side always runs first."""
    return SIDES if repeat % 2 == 0 else SIDES[::-1]


def bench_http(config: BenchConfig, targets: list[StoreTarget], tmp: Path, gen: LoadGenerator) -> list[HttpRow]:
    """Each store's service and baseline, with the ceiling and the floor, in passes; prints each row as measured."""
    print_http_header(len(read_answer()), len(append_body()))
    (tmp / "read.json").write_bytes(read_answer())
    (tmp / "append.json").write_bytes(append_body())
    loads = {"read": Load(READ_PATH, None, 1), "append": Load(APPEND_PATH, tmp / "append.json", APPEND_KEYS)}
    rows: list[HttpRow] = []
    read_body = ["--read-body", str(tmp / "read.json")]
    with (
        ServerProcess("ceiling", config.stack, child=read_body) as ceiling,
        ServerProcess("floor", config.stack, child=read_body) as floor,
    ):
        for target in targets:
            baseline_child = ["--store", target.name, "--url", target.baseline_url]
            with (
                ServerProcess("service", config.stack, store=target.url) as service,
                ServerProcess("baseline", config.stack, child=baseline_child) as baseline,
            ):
                servers = {"service": service, "baseline": baseline, "ceiling": ceiling, "floor": floor}
                for server in (service, baseline):
                    fill_read_conversation(server.url)
                for op in OPS:
                    for server in servers.values():
                        warm_up(server.url, loads[op])
                    row = HttpRow(target.name, op)
                    for repeat in range(config.repeats):
                        runs: dict[str, LoadResult] = {}
                        cpu: dict[str, float] = {}
                        for side in pass_order(repeat):
                            before = servers[side].cpu_seconds()
                            runs[side] = gen.run(servers[side].url, *_args(loads[op], config))
                            cpu[side] = servers[side].cpu_seconds() - before
                        row.add_pass(runs, cpu)
                    rows.append(row)
                    print(http_line(row), flush=True)
    return rows


def print_http_header(read_size: int, append_size: int) -> None:
    """What the HTTP table measures, and its column heads."""
    print(
        f"\nHTTP: read = GET of a {READ_MESSAGES}-message conversation ({read_size:,} bytes); append = POST of a "
        f"{APPEND_MESSAGES}-message batch ({append_size:,} bytes) with an Idempotency-Key, to {APPEND_KEYS} "
        "conversations in turn. service = `chatlab serve`; baseline = the obvious FastAPI app on the same store "
        "(benchmarks/baselines); ceiling = a bare Starlette app; floor = a bare FastAPI app made as the service's"
    )
    print(
        "x baseline, x ceiling: the service's requests a second over theirs, median of the passes; floor: the floor's "
        "over the ceiling's (the most a FastAPI service reaches here); p50, p99: latency, median of the passes; CPU: "
        "the server process's CPU time per request (steadier than the rate on a busy machine; a database's own CPU "
        "not counted)"
    )
    print(
        f"{'store':<11} {'op':<7} {'service/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU µs':>7} | {'baseline/s':>10} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'CPU µs':>7} | {'ceiling/s':>9} | {'x baseline':>10} {'x ceiling':>9} "
        f"{'floor':>6}",
        flush=True,
    )


def http_line(row: HttpRow) -> str:
    """One row of the HTTP table: the service's and the baseline's rate, latency and CPU, the ceiling's rate, ratios."""
    service = row.median("service")
    baseline = row.median("baseline")
    ceiling = row.median("ceiling")
    errors = sum(run.errors for side in row.runs.values() for run in side)
    note = f"  ({errors} non-2xx answers)" if errors else ""
    service_cpu = row.cpu_per_request("service") * 1e6
    baseline_cpu = row.cpu_per_request("baseline") * 1e6
    return (
        f"{row.store:<11} {row.op:<7} {service.rps:>9,.0f} {row.p50_ms('service'):>7.2f} {row.p99_ms('service'):>7.2f} "
        f"{service_cpu:>7,.0f} | {baseline.rps:>10,.0f} {row.p50_ms('baseline'):>7.2f} {row.p99_ms('baseline'):>7.2f} "
        f"{baseline_cpu:>7,.0f} | {ceiling.rps:>9,.0f} | {row.baseline_ratio:>10.2f} {row.ceiling_ratio:>9.2f} "
        f"{row.floor_ratio:>6.2f}{note}"
    )


def _args(load: Load, config: BenchConfig) -> tuple[str, Path | None, float, int]:
    return load.path, load.body, config.seconds, load.keys


_JSON = {"content-type": "application/json"}


def fill_read_conversation(url: str) -> None:
    """Store the read load's conversation, and check the server answers its 20 messages."""
    with httpx.Client(base_url=url, timeout=30) as client:
        # a PUT: the conversation holds exactly these messages, also in a store an earlier run filled
        client.put(READ_PATH, content=body(sample_messages(READ_MESSAGES)), headers=_JSON).raise_for_status()
        got = client.get(READ_PATH)
        got.raise_for_status()
        if got.json() != sample_messages(READ_MESSAGES):
            raise RuntimeError(f"{url} answers another conversation than the one stored: the comparison is unfair")


def warm_up(url: str, load: Load) -> None:
    """A few requests of the load before it is timed, so no side pays for its first requests in a pass."""
    raw = load.body.read_bytes() if load.body else None
    with httpx.Client(base_url=url, timeout=10) as client:
        for i in range(30):
            if raw is None:
                client.get(load.path).raise_for_status()
            else:
                client.post(f"{load.path}-{i % load.keys}", content=raw, headers=_JSON).raise_for_status()
