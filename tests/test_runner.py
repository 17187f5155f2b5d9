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


def _serving_stack(server: BackgroundServer) -> tuple[str, str]:
    """The event loop class and HTTP protocol class the running server really uses."""
    assert server._server is not None and server._thread is not None
    config = server._server.config
    return config.loop, config.http


def test_the_server_stack_is_the_fast_one_by_default_and_the_fallback_on_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CHATLAB_SERVER_STACK=asyncio runs asyncio + h11; by default uvloop + httptools where installed."""
    import importlib.util

    from chatlab.serverstack import STACK_VARIABLE

    monkeypatch.delenv(STACK_VARIABLE, raising=False)
    installed = importlib.util.find_spec
    fast = ("uvloop" if installed("uvloop") else "asyncio", "httptools" if installed("httptools") else "h11")
    with BackgroundServer(create_app(), name="fast") as server:
        assert _serving_stack(server) == fast
        assert httpx.get(server.url).status_code == 200
    monkeypatch.setenv(STACK_VARIABLE, "asyncio")
    with BackgroundServer(create_app(), name="fallback") as server:
        assert _serving_stack(server) == ("asyncio", "h11")
        assert httpx.get(server.url).status_code == 200
    monkeypatch.setenv(STACK_VARIABLE, "speedy")
    with pytest.raises(ValueError, match="fast, asyncio"):
        BackgroundServer(create_app(), name="unknown").start()


@pytest.mark.anyio
async def test_a_server_on_uvloop_in_a_thread_leaves_the_notebooks_loop_alone() -> None:
    """The server's loop is built in its thread: the caller's running loop and the loop policy stay as they were."""
    import asyncio

    policy, loop = asyncio.get_event_loop_policy(), asyncio.get_running_loop()
    with BackgroundServer(create_app(), name="in-thread") as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            (await client.post("/chat-history/k", json={"messages": []})).raise_for_status()
            assert (await client.get("/chat-history/k")).json() == []
    assert asyncio.get_event_loop_policy() is policy and asyncio.get_running_loop() is loop


def test_an_access_log_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="uvicorn.access"):
        with BackgroundServer(create_app(), name="quiet-access", log_level="info") as server:
            httpx.get(f"{server.url}/chat-history")
        assert not [r for r in caplog.records if r.name == "uvicorn.access"]
        with BackgroundServer(create_app(), name="logged", log_level="info", access_log=True) as server:
            httpx.get(f"{server.url}/chat-history")
        assert any("/chat-history" in r.getMessage() for r in caplog.records if r.name == "uvicorn.access")


# -- start_service hands back only the server that was asked for ---------------------------------

ALICE = "alice-key-0123456789abcdef"


def test_other_settings_start_another_server_not_the_open_one() -> None:
    from chatlab.service import ServiceSettings

    open_server = start_service()
    keyed = start_service(settings=ServiceSettings(api_keys={ALICE: "alice"}))
    try:
        assert keyed is not open_server
        assert httpx.get(f"{keyed.url}/chat-history").status_code == 401  # not the open server
        again = start_service(settings=ServiceSettings(api_keys={ALICE: "alice"}))  # a re-run cell: equal settings
        assert again is keyed
        assert start_service() is open_server
    finally:
        keyed.stop()
        open_server.stop()


def test_another_store_starts_another_server(tmp_path) -> None:
    memory = start_service()
    url = f"sqlite:///{tmp_path / 'history.db'}"
    on_file = start_service(store=url)
    try:
        assert on_file is not memory
        assert "SQLite" in httpx.get(on_file.url).json()["description"]
        httpx.post(f"{on_file.url}/chat-history/k", json={"messages": []}).raise_for_status()
        assert httpx.get(f"{memory.url}/chat-history").json() == []
        assert start_service(store=url) is on_file
    finally:
        on_file.stop()
        memory.stop()


def test_a_fixed_port_running_other_arguments_is_a_clear_error(tmp_path) -> None:
    from chatlab.service import ServiceSettings

    port = _free_port()
    first = start_service(port=port)
    try:
        with pytest.raises(RuntimeError, match=r"already running .* with other arguments"):
            start_service(port=port, settings=ServiceSettings(api_keys={ALICE: "alice"}))
        with pytest.raises(RuntimeError, match="stop that server first"):
            start_service(port=port, store=str(tmp_path / "history.db"))
        assert httpx.get(f"{first.url}/chat-history").status_code == 200  # the first one is untouched
    finally:
        first.stop()
