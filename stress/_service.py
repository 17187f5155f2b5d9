"""The service the stress scripts attack: ``python -m chatlab serve`` in a subprocess on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"  # loopback only: these scripts never reach another machine


@dataclass
class Service:
    process: subprocess.Popen[bytes]
    port: int

    def rss_mib(self) -> float | None:
        """The service's resident memory in MiB (Linux's /proc; ``None`` elsewhere)."""
        status = Path(f"/proc/{self.process.pid}/status")
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_service(flags: Sequence[str] = (), stack: str | None = None) -> Iterator[Service]:
    """Start the service (``stack``: ``fast`` or ``asyncio``), wait until it answers, stop it afterwards."""
    port = free_port()
    env = dict(os.environ)
    if stack:
        env["CHATLAB_SERVER_STACK"] = stack
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "chatlab", "serve", "--host", HOST, "--port", str(port), "--log-level", "error"]
    process = subprocess.Popen([*command, *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the service did not start") from None
                time.sleep(0.1)
        yield Service(process, port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")
