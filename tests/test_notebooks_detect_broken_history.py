"""The committed notebook outputs are a real check: a provider that loads nothing fails nbval."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "notebooks/03_running_the_agent.ipynb"

BREAK_THE_PROVIDER = """
import chatlab.client.provider

async def _load_nothing(self, key):
    return []

chatlab.client.provider.RemoteChatHistoryProvider._load = _load_nothing  # the article's GetMessagesAsync
chatlab.client.provider.RemoteChatHistoryProvider._history = _load_nothing  # what the agent's runs load
"""


def test_nbval_fails_when_the_provider_loads_no_history(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BREAK_THE_PROVIDER)  # runs in pytest and in the kernel
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
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
    # Cell 9 asks how long since the first time: without the history the answer is wrong.
    assert f"FAILED {NOTEBOOK}::Cell 9" in result.stdout
