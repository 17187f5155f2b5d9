"""The benchmark's own logic (``benchmarks/``): its arguments, ratios, goals, baselines and a smallest run.

Its figures are never checked: this machine is shared. What is checked is that the benchmark
computes what it says from what it measured, that each baseline serves the service's paths, and
that the quick mode runs through and prints every table and goal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from benchmarks import add_arguments, config_from_args
from benchmarks.baselines import baseline_app
from benchmarks.ceiling import ceiling_app, floor_app
from benchmarks.http import HttpRow, pass_order
from benchmarks.listing import ListingRow, PageTimes, bench_listing, expected_page, middle
from benchmarks.load import LoadResult, median_run
from benchmarks.report import GOAL_LISTING, baseline_goal, cpu_budget_line, goals
from benchmarks.stall import Latencies, StallRow
from benchmarks.storage import StorageRow, traffic
from benchmarks.turns import TurnRow
from benchmarks.workload import (
    APPEND_MESSAGES,
    READ_MESSAGES,
    append_body,
    conversation_key,
    json_size,
    namespaced_key,
    read_answer,
    sample_messages,
)
from chatlab.runner import BackgroundServer

ROOT = Path(__file__).resolve().parent.parent


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_quick_mode_is_short_and_options_override_it() -> None:
    quick = config_from_args(parse("--quick"))
    full = config_from_args(parse())
    assert quick.quick and quick.seconds < full.seconds and 3 <= quick.repeats <= full.repeats
    assert full.lengths == (10, 1_000, 10_000) and full.conversations == 100_000
    chosen = config_from_args(parse("--quick", "--lengths", "40,10", "--stores", "memory,sqlite", "--repeats", "4"))
    assert chosen.lengths == (10, 40) and chosen.stores == ("memory", "sqlite") and chosen.repeats == 4
    assert full.listing == (1_000, 100_000) and quick.listing == (1_000, 20_000)
    assert config_from_args(parse("--quick", "--listing", "5000,300")).listing == (300, 5_000)
    assert full.parts == ("http", "provider", "memory", "stalls", "listing")
    assert config_from_args(parse("--parts", "stalls,http")).parts == ("stalls", "http")


@pytest.mark.parametrize(
    "argv,message",
    [
        (("--stores", "memory,mongo"), r"unknown store\(s\) mongo: choose from"),
        (("--parts", "http,speed"), r"unknown part\(s\) speed: choose from http, provider, memory, stalls, listing"),
        (("--lengths", "10,many"), "--lengths takes whole numbers"),
        (("--repeats", "0"), "--repeats must be at least 1"),
        (("--listing", "1000"), "--listing takes two numbers of conversations, each at least 200"),
        (("--listing", "100,1000"), "--listing takes two numbers"),
    ],
)
def test_bad_arguments_say_what_is_wrong(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config_from_args(parse(*argv))


def run(rps: float, p99_ms: float = 2.0) -> LoadResult:
    return LoadResult(rps, 1.0, p99_ms, int(rps), 0)


def test_a_ratio_is_the_median_of_its_passes_not_of_medians() -> None:
    row = HttpRow("memory", "read")
    for service, baseline, ceiling, floor in [(300, 100, 400, 200), (100, 100, 100, 90), (250, 50, 500, 400)]:
        row.add_pass({"service": run(service), "baseline": run(baseline), "ceiling": run(ceiling), "floor": run(floor)})
    assert row.vs_baseline == [3.0, 1.0, 5.0] and row.baseline_ratio == 3.0
    assert row.vs_ceiling == [0.75, 1.0, 0.5] and row.ceiling_ratio == 0.75
    assert row.floor_vs_ceiling == [0.5, 0.9, 0.8] and row.floor_ratio == 0.8
    assert row.median("service").rps == 250 == median_run(row.runs["service"]).rps
    assert row.cpu_per_request("service") != row.cpu_per_request("service")  # NaN: no CPU times given


def test_cpu_per_request_is_the_median_of_the_passes() -> None:
    row = HttpRow("memory", "append")
    for seconds in (1.0, 3.0, 2.0):
        row.add_pass({side: run(1000) for side in row.runs}, dict.fromkeys(row.cpu, seconds))
    assert row.cpu_per_request("service") == 0.002 and row.cpu["baseline"] == [0.001, 0.003, 0.002]
    assert pass_order(0) == ("service", "baseline", "ceiling", "floor") and pass_order(1) == pass_order(0)[::-1]


def test_the_cpu_budget_is_the_services_cpu_beyond_the_floor_and_the_room_the_goals_leave_it() -> None:
    sqlite, redis = HttpRow("sqlite", "append"), HttpRow("redis", "append")
    cpu = {"service": 0.25, "baseline": 0.4, "ceiling": 0.1, "floor": 0.125}  # seconds over 1,000 requests
    for row in (sqlite, redis):
        row.add_pass({side: run(1000) for side in row.runs}, cpu)
    # own: 250 - 125 µs; room: 400 / 2.0 - 125 for SQLite appends, 400 / 1.3 - 125 for Redis appends
    assert " ".join(cpu_budget_line(sqlite).split()) == "sqlite append 250 400 100 125 | 125 75"
    assert " ".join(cpu_budget_line(redis).split()) == "redis append 250 400 100 125 | 125 183"


def test_the_rate_goals_are_1_3_everywhere_and_more_where_the_design_should_show() -> None:
    assert [baseline_goal(store, "read") for store in ("memory", "sqlite", "postgresql", "redis")] == [1.5, 2, 2, 2]
    assert [baseline_goal(store, "append") for store in ("memory", "sqlite", "postgresql", "redis")] == [1.3, 2, 2, 1.3]


def http_rows(service_rps: float, service_p99: float) -> list[HttpRow]:
    """One pass per store and operation: the service at ``service_rps`` and ``service_p99`` against 100/s at 5 ms."""
    rows = []
    for store in ("memory", "sqlite", "postgresql", "redis"):
        for op in ("read", "append"):
            row = HttpRow(store, op)
            service = run(service_rps, service_p99)
            row.add_pass({"service": service, "baseline": run(100, 5.0), "ceiling": run(900), "floor": run(800)})
            rows.append(row)
    return rows


def test_goals_cover_every_store_and_operation_against_its_baseline_rate_and_tail() -> None:
    config = config_from_args(parse("--quick", "--lengths", "10,40"))
    turns = [
        TurnRow("memory", length, mode, 1.0, 100, ratio)
        for length, ratio in ((10, 1.0), (40, 1.3))
        for mode in ("incremental", "full")
    ]
    lines = [goal.line() for goal in goals(config, http_rows(160, 5.0), turns, StorageRow(100, 300.0, 100.0))]
    assert "  memory read >= 1.5 x the baseline: 1.60 (passes 1.60-1.60) (met)" in lines
    assert "  memory append >= 1.3 x the baseline: 1.60 (passes 1.60-1.60) (met)" in lines
    assert "  redis append >= 1.3 x the baseline: 1.60 (passes 1.60-1.60) (met)" in lines
    for store, op in (("sqlite", "read"), ("sqlite", "append"), ("postgresql", "append"), ("redis", "read")):
        assert f"  {store} {op} >= 2.0 x the baseline: 1.60 (passes 1.60-1.60) (NOT met)" in lines
        assert f"  {store} {op} p99 <= the baseline's p99: 5.0 ms against 5.0 ms (met)" in lines
    assert not any("ceiling" in line for line in lines)  # the ceiling's figures are printed, not goals
    assert "  provider turn at 40 messages <= 1.2x the turn at 10: 1.30x (full loads: 1.3x) (NOT met)" in lines
    assert "  memory (service RSS) <= 2.0x the JSON under the provider's traffic: 3.00x (NOT met)" in lines
    slower = [goal.line() for goal in goals(config, http_rows(300, 5.5), [], None)]
    assert "  postgresql append p99 <= the baseline's p99: 5.5 ms against 5.0 ms (NOT met)" in slower
    assert "  postgresql append >= 2.0 x the baseline: 3.00 (passes 3.00-3.00) (met)" in slower


def test_the_tail_is_the_median_of_the_passes_p99s() -> None:
    row = HttpRow("redis", "read")
    for p99 in (9.0, 30.0, 12.0):
        row.add_pass({"service": run(200, p99), "baseline": run(100, p99 / 3), "ceiling": run(1), "floor": run(1)})
    assert row.p99_ms("service") == 12.0 and row.p99_ms("baseline") == 4.0


def test_the_stall_goal_is_the_longest_wait_during_the_job() -> None:
    config = config_from_args(parse("--quick"))
    quiet = Latencies([0.001] * 50)
    stalls = [
        StallRow("worst body", quiet, Latencies([0.002] * 98 + [0.0999, 0.004]), [1.0], 10),
        StallRow("list", quiet, Latencies([0.002] * 99 + [0.31]), [1.0], 10),
    ]
    lines = [goal.line() for goal in goals(config, [], [], None, stalls=stalls)]
    assert lines == [
        "  GET / during worst body waits <= 100 ms: longest 99.9 ms (met)",
        "  GET / during list waits <= 100 ms: longest 310.0 ms (NOT met)",
    ]


def test_the_listing_pages_start_in_the_middle_and_its_ratio_is_the_median_of_the_passes() -> None:
    assert middle(1_000) == [460, 480, 500, 520, 540] and middle(200) == [92, 96, 99]
    key = conversation_key
    assert expected_page(99) == [key(i) for i in range(100, 200)] and key(7) < key(10) < key(100)
    times = PageTimes()
    for small, large in ((1.0, 3.0), (2.0, 2.0), (1.0, 1.2)):
        times.add_pass(small, large)
    assert times.ratios == [3.0, 1.0, 1.2] and times.ratio == 1.2 and times.ms() == (1000.0, 2000.0)
    beside = PageTimes()
    beside.add_pass(1.0, 1.6)
    config = config_from_args(parse("--quick", "--listing", "300,600"))
    measured = [ListingRow("sqlite", config.listing, times, times, "", beside), ListingRow("redis", (300, 600), times)]
    lines = [goal.line() for goal in goals(config, [], [], None, measured)]
    assert lines == [
        f"  sqlite page of 100 at 600 conversations <= {GOAL_LISTING}x the page at 300: 1.20x (passes 1.00-3.00) (met)",
        f"  sqlite page of 100 beside 600 namespaced conversations <= {GOAL_LISTING}x the page at 300: 1.60x "
        "(passes 1.60-1.60) (NOT met)",
        f"  redis page of 100 at 600 conversations <= {GOAL_LISTING}x the page at 300: 1.20x (passes 1.00-3.00) (met)",
        f"  redis page of 100 beside 600 namespaced conversations <= {GOAL_LISTING}x the page at 300: not measured "
        "(NOT met)",
    ]


def test_the_namespaced_conversations_lie_between_the_plain_ones() -> None:
    keys = sorted([conversation_key(i) for i in range(3)] + [namespaced_key(n, 3) for n in range(6)])
    assert keys == [
        "user-0000000",
        "user-0000000/c0000000",
        "user-0000000/c0000001",
        "user-0000001",
        "user-0000001/c0000000",
        "user-0000001/c0000001",
        "user-0000002",
        "user-0000002/c0000000",
        "user-0000002/c0000001",
    ]


def figures(line: str) -> list[str]:
    """The numbers of a table row, without its store and note."""
    return [word for word in line.replace("|", " ").split() if word[0].isdigit()]


def listing_row_has_its_figures(line: str) -> None:
    """A listing row: the page's ms at both sizes and their ratio, the same over HTTP, and beside the namespaced
    conversations."""
    direct, http, beside = line.split("|")
    lo, hi, ratio = figures(direct)
    assert float(lo) > 0 and float(hi) > 0 and ratio.endswith("x") and float(ratio[:-1]) > 0, line
    http_lo, http_hi, http_ratio = figures(http)
    assert float(http_lo) > 0 and float(http_hi) > 0 and float(http_ratio[:-1]) > 0, line
    beside_ms, beside_ratio = figures(beside)
    assert float(beside_ms) > 0 and float(beside_ratio[:-1]) > 0, line


def test_the_listing_prints_a_page_at_both_sizes_and_their_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_from_args(parse("--quick", "--stores", "memory", "--listing", "200,500", "--repeats", "2"))
    rows = bench_listing(config, ["memory"], tmp_path)
    out = capsys.readouterr().out
    assert "from a store of 200 conversations and from one of 500 (quick mode; the full run: 1,000 and 100,000)" in out
    assert "`store.summaries(after=KEY, limit=100)`" in out and "`GET /chat-history?limit=100&after=KEY`" in out
    assert "ms at 200" in out and "ms at 500" in out and "200 conversations and 500 namespaced ones" in out
    [line] = rows_of(out, "memory")
    listing_row_has_its_figures(line)
    [row] = rows
    assert row.sizes == (200, 500) and len(row.direct.ratios) == 2
    assert row.beside is not None and len(row.beside.ratios) == 2


def test_the_workload_is_the_articles_turns() -> None:
    answer = json.loads(read_answer())
    assert answer == sample_messages(READ_MESSAGES) and len(answer) == READ_MESSAGES
    assert len(json.loads(append_body())["messages"]) == APPEND_MESSAGES
    bodies = traffic(40)
    assert len(bodies) == 40 // APPEND_MESSAGES
    assert json_size(bodies) == sum(
        len(json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode())
        for b in bodies
        for m in json.loads(b)["messages"]
    )


def check_baseline(url: str) -> None:
    """The baseline serves the service's paths: a PUT, an append, a read of both in order."""
    first, second = sample_messages(3), sample_messages(4, start=7)
    with httpx.Client(base_url=url, timeout=30) as client:
        client.get("/").raise_for_status()
        assert client.get("/chat-history/nobody").json() == []
        client.put("/chat-history/k", json={"messages": first}).raise_for_status()
        client.put("/chat-history/k", json={"messages": first}).raise_for_status()  # a replace, not an append
        appended = client.post("/chat-history/k", json={"messages": second})
        assert appended.status_code == 202 and appended.headers["location"] == "/chat-history/k"
        assert client.get("/chat-history/k").json() == first + second
        assert client.post("/chat-history/k", json={"messages": "no"}).status_code == 422


@pytest.fixture
def serve() -> Iterator[list[BackgroundServer]]:
    servers: list[BackgroundServer] = []
    yield servers
    for server in servers:
        server.stop()


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_baselines_serve_the_services_paths(store: str, tmp_path: Path, serve: list[BackgroundServer]) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'baseline.db'}"
    serve.append(BackgroundServer(baseline_app(store, url), name=f"baseline-{store}").start())
    check_baseline(serve[-1].url)


def test_an_unknown_baseline_says_which_exist() -> None:
    with pytest.raises(ValueError, match="choose from memory, sqlite, postgresql, redis"):
        baseline_app("mongo", "mongodb://")


@pytest.mark.parametrize("make", [ceiling_app, floor_app])
def test_the_ceiling_and_the_floor_answer_the_reads_bytes_and_take_appends(
    make: Callable[[bytes], Starlette], serve: list[BackgroundServer]
) -> None:
    serve.append(BackgroundServer(make(read_answer()), name="framework-limit").start())
    with httpx.Client(base_url=serve[-1].url, timeout=10) as client:
        assert client.get("/").status_code == 200
        assert client.get("/chat-history/any").content == read_answer()
        answer = client.post("/chat-history/k-1", content=append_body())
        assert answer.status_code == 202 and answer.headers["location"] == "/chat-history/k-1"


def quick_bench(stores: str, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """``python -m benchmarks --quick`` on ``stores`` at the smallest sizes, with ``env`` added; and its pid."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "benchmarks", "--quick", "--stores", stores, "--lengths", "10,40", "--turns", "1"]
    cmd += ["--memory-messages", "80", "--conversations", "50", "--load", "python"]
    cmd += ["--seconds", "0.2", "--connections", "2", "--listing", "200,400"]
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path, **env}
    ) as bench:
        stdout, stderr = bench.communicate(timeout=500)
    return subprocess.CompletedProcess(cmd, bench.returncode, stdout, stderr), bench.pid


def rows_of(stdout: str, *words: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.split()[: len(words)] == list(words)]


def test_the_quick_benchmark_prints_every_table_and_goal() -> None:
    out, _ = quick_bench("memory")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "load generator: python asyncio client" in out.stdout
    assert rows_of(out.stdout, "memory", "read") and rows_of(out.stdout, "memory", "append"), out.stdout
    memory_rows = rows_of(out.stdout, "memory", "read") + rows_of(out.stdout, "memory", "append")
    http_rows = [r for r in memory_rows if r.count("|") == 3]  # the rates' table; the CPU table has one "|"
    assert len(http_rows) == 2 and len([r for r in memory_rows if r.count("|") == 1]) == 2, out.stdout
    for row in http_rows:
        service, baseline = row.split("|")[:2]
        assert float(service.split()[-1].replace(",", "")) > 0 and float(baseline.split()[-1].replace(",", "")) > 0
    for length in ("10", "40"):
        assert rows_of(out.stdout, "memory", length, "incremental") and rows_of(out.stdout, "memory", length, "full")
    assert "RSS growth" in out.stdout
    assert rows_of(out.stdout, "during", "worst", "body") and rows_of(out.stdout, "during", "list"), out.stdout
    assert "GET /chat-history of 50 conversations" in out.stdout
    assert "one page of 100 summaries" in out.stdout and "from a store of 200 conversations" in out.stdout
    [listing] = [line for line in rows_of(out.stdout, "memory") if "|" in line and line.split()[1][0].isdigit()]
    listing_row_has_its_figures(listing)
    assert "FastAPI floor against the ceiling (the most any FastAPI service reaches here): read " in out.stdout
    assert "CPU per request (µs;" in out.stdout
    goal_lines = [line for line in out.stdout.splitlines() if line.endswith(("(met)", "(NOT met)"))]
    for goal in (
        "memory read >= 1.5 x the baseline",
        "memory append >= 1.3 x the baseline",
        "memory read p99 <= the baseline's p99",
        "memory append p99 <= the baseline's p99",
        "GET / during worst body waits <= 100 ms",
        "GET / during list waits <= 100 ms",
        "provider turn at 40 messages <= 1.2x the turn at 10",
        "memory (service RSS) <= 2.0x the JSON",
        f"memory page of 100 at 400 conversations <= {GOAL_LISTING}x the page at 200",
        f"memory page of 100 beside 400 namespaced conversations <= {GOAL_LISTING}x the page at 200",
    ):
        assert any(line.startswith(f"  {goal}") for line in goal_lines), goal
