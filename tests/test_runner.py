"""The background runner: free or fixed ports, idempotent start, clean stop, quiet logs."""

from __future__ import annotations

import socket

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import SERVICE_NAME, create_app, start_service


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_port_zero_serves_on_the_reported_url() -> None:
    server = start_service()
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.port != 0
        assert httpx.get(server.url).json()["service"] == SERVICE_NAME
    finally:
        server.stop()


def test_start_is_idempotent_for_a_rerun_cell_and_stop_frees_the_port() -> None:
    port = _free_port()
    first = start_service(port=port)
    try:
        httpx.post(f"{first.url}/chat-history/k", json={"messages": []}).raise_for_status()
        again = start_service(port=port)
        assert again is first
        assert first.start() is first
    finally:
        first.stop()
    first.stop()  # harmless twice
    assert not first.is_running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/")
    restarted = start_service(port=port)  # the port is free again
    try:
        assert restarted is not first and httpx.get(restarted.url).status_code == 200
    finally:
        restarted.stop()


def test_a_taken_port_gives_a_clear_error() -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(OSError, match="port=0 for any free port"):
            BackgroundServer(create_app(), name="blocked", port=port).start()


def test_url_before_start_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="call start"):
        _ = BackgroundServer(create_app()).url


def test_logs_stay_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    with BackgroundServer(create_app(), name="quiet") as server:
        httpx.get(f"{server.url}/chat-history")
        httpx.get(f"{server.url}/missing")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
