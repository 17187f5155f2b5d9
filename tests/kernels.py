"""A notebook's cells run through a real kernel (this environment's ipykernel), as JupyterLab runs them."""

from __future__ import annotations

import json
import os
import queue
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent
CELL_TIMEOUT = 300  # seconds; a cell that takes longer is stuck


def code_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


class Kernel:
    """A started kernel and its blocking client, with what a cell printed and whether it failed."""

    def __init__(self, manager: KernelManager, client: BlockingKernelClient) -> None:
        self.manager = manager
        self.client = client

    def run(self, code: str, timeout: float = CELL_TIMEOUT) -> tuple[str, dict[str, Any]]:
        """Run ``code`` as a cell: its printed text and its execute reply's content."""
        printed: list[str] = []

        def collect(message: dict[str, Any]) -> None:
            if message["msg_type"] == "stream":
                printed.append(message["content"]["text"])
            elif message["msg_type"] == "error":
                printed.append("\n".join(message["content"]["traceback"]))

        reply = self.client.execute_interactive(code, timeout=timeout, output_hook=collect, allow_stdin=False)
        return "".join(printed), reply["content"]

    def run_cells(self, cells: list[str], notebook: Path, stage: str) -> None:
        for index, code in enumerate(cells):
            printed, reply = self.run(code)
            if reply["status"] != "ok":
                pytest.fail(
                    f"{notebook.name}, {stage}: code cell {index} failed with "
                    f"{reply.get('ename')}: {reply.get('evalue')}\n{_strip_ansi(printed)[-3000:]}"
                )

    def run_interrupted(self, code: str, after: float) -> tuple[dict[str, Any], float]:
        """Run ``code``, press the stop button ``after`` seconds in: the cell's reply content and the seconds from the
        interrupt to that reply (what the interrupted cell printed is drained, so the kernel is quiet afterwards)."""
        message_id = self.client.execute(code, allow_stdin=False)
        time.sleep(after)
        self.manager.interrupt_kernel()
        interrupted = time.monotonic()
        while True:
            try:
                message = self.client.get_shell_msg(timeout=CELL_TIMEOUT)
            except queue.Empty:
                pytest.fail(f"no reply at all after the interrupt of:\n{code[:300]}")
            if message["parent_header"].get("msg_id") == message_id:
                break
        took = time.monotonic() - interrupted
        while True:
            try:
                self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                break
        return message["content"], took

    def pid(self) -> int:
        printed, _ = self.run("import os as _os_for_the_test; print(_os_for_the_test.getpid())")
        return int(printed.strip())


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def listening(pid: int) -> set[str]:
    """The TCP addresses the kernel process listens on (its own ZeroMQ ports included)."""
    connections = psutil.Process(pid).net_connections(kind="tcp")
    return {f"{c.laddr.ip}:{c.laddr.port}" for c in connections if c.status == psutil.CONN_LISTEN}


@contextmanager
def started_kernel(notebook: Path, environment: Mapping[str, str] | None = None) -> Iterator[Kernel]:
    """A fresh kernel in the notebook's folder, with the offline model and this checkout's chatlab; ``environment``
    adds variables (``CHAT_HISTORY_SERVICE_URL``, which is otherwise left out)."""
    env = {key: value for key, value in os.environ.items() if key != "CHAT_HISTORY_SERVICE_URL"}
    env["CHATLAB_LLM"] = "offline"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(environment or {})
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env, cwd=str(notebook.parent))
    client = manager.blocking_client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        yield Kernel(manager, client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
