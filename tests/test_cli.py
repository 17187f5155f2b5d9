"""``python -m chatlab serve`` runs the same service as a process."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from tests.summaries import article
from tests.test_runner import _free_port


def test_serve_runs_the_service_on_the_given_port() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "chatlab", "serve", "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.post(f"{url}/chat-history/k1", json={"messages": [{"role": "user", "contents": []}]})
                break
            except httpx.ConnectError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "service did not start"
                time.sleep(0.1)
        assert response.status_code == 202
        assert article(httpx.get(f"{url}/chat-history").json()) == [{"conversationKey": "k1", "messageCount": 1}]
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}" in out
    assert "Server: uvicorn (" in out and "access log off" in out  # the stack it runs on, quiet by default


def test_serve_refuses_an_unknown_store_url() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chatlab", "serve", "--store", "nosuch://x"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "unsupported store URL" in result.stderr
