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
    # SIGINT raises KeyboardInterrupt, as in a terminal or a kernel, also where the tests run as a background job
    # (which starts with SIGINT ignored, and Python then installs no handler of its own)
    code = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); import chatlab; chatlab.pause(600)"
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


def test_the_stop_button_stops_a_pause_in_a_notebook_kernel() -> None:
    """Through a real kernel: the interrupt JupyterLab's stop button sends ends a pause cell with KeyboardInterrupt."""
    manager = pytest.importorskip("jupyter_client.manager")
    kernel, client = manager.start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    try:
        request = client.execute("import chatlab\nchatlab.pause(600)")
        while True:  # wait until the countdown shows
            message = client.get_iopub_msg(timeout=60)
            if message["parent_header"].get("msg_id") == request and "waiting" in message["content"].get("text", ""):
                break
        kernel.interrupt_kernel()
        reply = client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != request:
            reply = client.get_shell_msg(timeout=60)
    finally:
        client.stop_channels()
        kernel.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
