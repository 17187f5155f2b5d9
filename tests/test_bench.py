"""The benchmark runs and prints its tables (its figures are not checked: this machine is shared)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


QUICK = ["--quick", "--lengths", "10,40", "--turns", "2", "--memory-messages", "200", "--load", "python"]
QUICK += ["--seconds", "0.3", "--connections", "4"]


def quick_bench(stores: str, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """``python -m chatlab bench --quick`` on ``stores`` (the smallest sizes), with ``env`` added; and its pid."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "chatlab", "bench", "--stores", stores, *QUICK]
    run_env = {**os.environ, "PYTHONPATH": path, **env}
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env, cwd=ROOT
    ) as bench:
        stdout, stderr = bench.communicate(timeout=300)
    return subprocess.CompletedProcess(cmd, bench.returncode, stdout, stderr), bench.pid


def assert_store_alone_rows(stdout: str, store: str) -> None:
    """A database store's HTTP rows carry the store alone's rate and ratio to the ceiling, positive, and
    the bound each goal is measured against is spelled out under the table."""
    for op in ("read", "append"):
        row = next(line for line in stdout.splitlines() if line.split()[:2] == [store, op])
        rate, ratio = row.split("|")[3].split()
        assert float(rate.replace(",", "")) > 0 and float(ratio) > 0, row
        bound = f"  {store} {op} alone "
        assert any(line.startswith(bound) and " of the ceiling: the goal " in line for line in stdout.splitlines())
        goal = next(line for line in stdout.splitlines() if line.startswith(f"  {store} {op} >= "))
        assert "(the store alone: " in goal, goal


def test_quick_bench_prints_every_table_row() -> None:
    out, _ = quick_bench("memory,sqlite")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()

    def row(*words: str) -> bool:
        return any(line.split()[: len(words)] == list(words) for line in lines if line.strip())

    assert "load generator: python asyncio client" in out.stdout
    for store in ("memory", "sqlite"):
        assert row(store, "read") and row(store, "append"), out.stdout
        for length in ("10", "40"):
            assert row(store, length, "incremental") and row(store, length, "full"), out.stdout
    assert row("memory") and any(line.startswith("sqlite") and "database file" in line for line in lines), out.stdout
    assert row("ceiling", "read") and row("ceiling", "append"), out.stdout  # the ceiling against the limit
    assert "HTTP on the fast stack" in out.stdout or "HTTP on the asyncio stack" in out.stdout
    for goal in (
        "memory read >= 0.7 of the ceiling",
        "memory append >= 0.5 of the ceiling",
        "sqlite read >= 0.5 of the ceiling",
        "sqlite append >= 0.3 of the ceiling",
        "provider turn at 40 messages <= 1.2x the turn at 10",
        "memory (service RSS) <= 2.0x the JSON under the provider's traffic",
    ):
        assert any(line.startswith(f"  {goal}") and line.endswith(("(met)", "(NOT met)")) for line in lines), goal
    for goal_line in (line for line in lines if " of the ceiling (" in line and line.startswith("  ")):
        # each HTTP goal shows the spread of its pairs, and the median figure lies within it
        figure, spread = goal_line.split(": ")[1].split(" (pairs ")
        low, high = (float(x) for x in spread.split(")")[0].split("-"))
        assert 0 < low <= float(figure) <= high, goal_line
    assert "tracemalloc" in out.stdout
    assert_store_alone_rows(out.stdout, "sqlite")
    assert not any(line.startswith("  memory read alone") for line in lines)  # no database to bound it
    assert row("store", "op") and "store alone req/s" in out.stdout
