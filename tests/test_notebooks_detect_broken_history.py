"""The committed notebook outputs are a real check: a provider that loads nothing fails nbval."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "notebooks/03_running_the_agent.ipynb"

# Notebook 3's agent runs with the learner's class (notebooks/remote_provider.py): make its load return nothing.
BREAK_THE_PROVIDER = """
import remote_provider

async def _load_nothing(self, key):
    return []

remote_provider.RemoteChatHistoryProvider._get_messages_core = _load_nothing  # the article's GetMessagesCoreAsync
"""


def test_nbval_fails_when_the_provider_loads_no_history(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BREAK_THE_PROVIDER)  # runs in pytest and in the kernel
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), str(ROOT / "notebooks")])}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", NOTEBOOK],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stdout[-3000:]
    assert "Cell outputs differ" in result.stdout
    # The cell that asks how long since the first time: without the history the answer is wrong.
    code = [c for c in nbformat.read(ROOT / NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    elapsed = next(i for i, c in enumerate(code) if "最初の時刻からどれくらい経過していますか?" in c.source)
    assert f"FAILED {NOTEBOOK}::Cell {elapsed}" in result.stdout
