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


def test_serve_keeps_its_startup_objects_out_of_later_garbage_collections() -> None:
    # in a process of its own (freezing is process-wide): serve as far as the server's start, recorded there
    script = """
import gc, sys, uvicorn
from chatlab.cli import main
def run(app, **options):
    print("frozen", gc.get_freeze_count(), "tracked", len(gc.get_objects()))
uvicorn.run = run
sys.exit(main(["serve", "--port", "0", "--store", "memory://"]))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split("frozen", 1)[1].split()
    frozen, tracked = int(words[0]), int(words[2])
    assert frozen > 10_000 and tracked < frozen / 10  # the startup objects, frozen; few left for a collection to walk
