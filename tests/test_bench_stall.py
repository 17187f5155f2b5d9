"""The loop-stall measurement runs and prints its two rows (its figures are not checked: this machine is shared)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from chatlab.bench.stall import MAX_BODY_BYTES, worst_body

ROOT = Path(__file__).resolve().parent.parent


def test_the_worst_body_fills_the_default_limit() -> None:
    body, items = worst_body()
    assert MAX_BODY_BYTES - 17 < len(body) <= MAX_BODY_BYTES
    assert body.count(b'{"$type":"text"}') == items > 490_000


def test_quick_stall_prints_get_alone_and_under_load() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "chatlab.bench.stall", "--quick"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line[:18].strip(): line[18:].split() for line in out.stdout.splitlines()}
    alone, loaded = rows["GET / alone"], rows["GET / under load"]
    assert len(alone) == 4 and all(float(x.replace(",", "")) > 0 for x in alone), out.stdout
    assert float(loaded[1]) > 0 and "(2 writes of" in out.stdout, out.stdout
