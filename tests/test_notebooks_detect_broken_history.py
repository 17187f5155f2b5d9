"""The committed notebook outputs are a real check: a provider that loads nothing fails nbval."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "03_running_the_agent.ipynb"

# Notebook 3's agent runs with the learner's class (remote_provider.py, which it reads afresh): make its load, the
# article's GetMessagesCoreAsync, return nothing.
LOADS = "        return messages_from_meai(response.json())\n"
LOADS_NOTHING = "        return []  # broken: the stored history is never loaded\n"


def test_nbval_fails_when_the_provider_loads_no_history(tmp_path: Path) -> None:
    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns("md", "__pycache__"))
    provider = folder / "remote_provider.py"
    assert provider.read_text(encoding="utf-8").count(LOADS) == 1
    provider.write_text(provider.read_text(encoding="utf-8").replace(LOADS, LOADS_NOTHING), encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            "pyproject.toml",
            "--rootdir",
            ".",
            str(folder / NOTEBOOK),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)])},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stdout[-3000:]
    assert "Cell outputs differ" in result.stdout
    # The cell that asks how long since the first time: without the history the answer is wrong.
    code = [c for c in nbformat.read(folder / NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    elapsed = next(i for i, c in enumerate(code) if "最初の時刻からどれくらい経過していますか?" in c.source)
    assert f"::Cell {elapsed} - " in result.stdout, result.stdout[-3000:]  # among the FAILED lines
