"""``chatlab.pause``: a countdown that leaves one stable line, and that a real interrupt stops at once."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import chatlab

ROOT = Path(__file__).resolve().parents[1]
CARRIAGE_RETURN = re.compile(r".*\r(?=[^\n])")  # what Jupyter, nbval and nbconvert do with a rewritten line


def test_a_finished_pause_leaves_one_stable_line(capsys: pytest.CaptureFixture[str]) -> None:
    chatlab.pause(1.2)
    out = capsys.readouterr().out
    assert "waiting: 2 s left" in out
    assert CARRIAGE_RETURN.sub("", out).rstrip() == "waited 1.2 s"


def test_a_pause_of_zero_seconds_returns_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    chatlab.pause(0)
    assert CARRIAGE_RETURN.sub("", capsys.readouterr().out).rstrip() == "waited 0 s"


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf")])
def test_a_pause_refuses_what_is_not_a_duration(seconds: float) -> None:
    with pytest.raises(ValueError, match="seconds >= 0"):
        chatlab.pause(seconds)


def test_an_interrupt_stops_a_pause_long_before_its_end() -> None:
    """SIGINT (what the kernel's stop button sends) ends a 600 s pause, which says how long it waited."""
    code = "import chatlab; chatlab.pause(600)"
    with subprocess.Popen(
        [sys.executable, "-u", "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdout is not None
        first = process.stdout.read(len(b"\rwaiting: 600 s left"))  # the countdown has started
        assert first == b"\rwaiting: 600 s left"
        process.send_signal(signal.SIGINT)
        out_bytes, err_bytes = process.communicate(timeout=60)
    out, err = out_bytes.decode(), err_bytes.decode()
    assert process.returncode != 0
    assert "KeyboardInterrupt" in err
    stopped = re.search(r"stopped: ([\d.]+) s of 600 s waited", out)
    assert stopped is not None, out
    assert float(stopped.group(1)) < 590  # it did not wait out the pause
