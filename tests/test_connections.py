"""Connections are bounded: idle keep-alive and slow-body clients are cut off, and the connections served are capped.

A request head's time is not bounded by the service, nor its size on httptools: docs/protections.md says what to put
in front. On h11 uvicorn's own bound on a head's size holds.

Raw sockets against a real server on loopback; every loop is bounded, every wait has a generous timeout
(an outcome is asserted, never a duration).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.serverstack import STACK_VARIABLE
from chatlab.service import ServiceSettings, start_service
from chatlab.service.server_options import MAX_HEAD_BYTES

FAST = ServiceSettings(keep_alive_timeout=0.5, body_timeout=0.5)
GET = b"GET /chat-history/keep-alive HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # answered "[]" with a Content-Length


def connect(server: BackgroundServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port or 0), timeout=30)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.fixture
def fast() -> Iterator[BackgroundServer]:
    server = start_service(settings=FAST)
    yield server
    server.stop()


def test_an_idle_keep_alive_connection_is_closed() -> None:
    server = start_service(settings=ServiceSettings(keep_alive_timeout=0.5))
    try:
        with connect(server) as sock:
            sock.sendall(GET)
            answer = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"[]")  # answered, then closed when idle
    finally:
        server.stop()


def test_a_busy_connection_outlives_the_keep_alive_timeout(fast: BackgroundServer) -> None:
    """The keep-alive timeout runs from each answer, not from the connection's opening: requests on one keep-alive
    connection for three times ``keep_alive_timeout`` are all answered."""
    with connect(fast) as sock:
        started = time.monotonic()
        answers = 0
        while time.monotonic() - started < 3 * FAST.keep_alive_timeout:
            sock.sendall(GET)
            answer = b""
            while not answer.endswith(b"[]"):
                chunk = sock.recv(65536)
                assert chunk, f"closed after {answers} answers"
                answer += chunk
            answers += 1
            time.sleep(0.1)
    assert answers >= 5


def test_a_slow_body_gets_408_and_the_connection_is_closed(fast: BackgroundServer) -> None:
    body = b'{"messages": []}'
    with connect(fast) as sock:
        sock.sendall(
            b"POST /chat-history/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body[:5]
        )
        answer = read_until_closed(sock)
    head, _, detail = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answer
    assert b"application/problem+json" in head and b"connection: close" in head.lower()
    assert b"did not arrive within 0.5 s" in detail
    assert httpx.get(f"{fast.url}/chat-history/k").json() == []  # nothing written


def test_open_connections_serving_requests_over_the_cap_get_503() -> None:
    """When every slot serves a request (here: a body that has not all come), a further request gets 503."""
    server = start_service(settings=ServiceSettings(max_connections=2, body_timeout=60))
    held: list[socket.socket] = []
    head = b"POST /chat-history/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    try:
        for _ in range(2):
            sock = connect(server)
            sock.sendall(head + b"Expect: 100-continue\r\nContent-Length: 100\r\n\r\n")
            held.append(sock)
            assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")  # the app reads its body: it is being served
        over = httpx.get(f"{server.url}/chat-history", headers={"Connection": "close"}, timeout=30)
        assert over.status_code == 503
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_on_h11_a_head_over_64_kib_is_cut_off_while_it_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    """On h11, a head that never ends is refused once 64 KiB came (h11's bound, set by the service), not kept in
    memory while it grows."""
    monkeypatch.setenv(STACK_VARIABLE, "asyncio")
    server = start_service(settings=FAST)
    try:
        answer = head_flood_answer(server)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer[:200]  # b"": reset before it was read
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
    finally:
        server.stop()


def test_on_h11_a_head_within_the_apps_limits_gets_the_apps_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """h11's bound is above the app's: a head of an 8 KiB URL and 8 KiB of fields gets the app's 431, not h11's 400."""
    monkeypatch.setenv(STACK_VARIABLE, "asyncio")
    server = start_service(settings=FAST)
    try:
        fields = {f"x-field-{i}": "a" * 1000 for i in range(9)}
        answer = httpx.get(f"{server.url}/chat-history/{'k' * 8000}", headers=fields, timeout=30)
        assert answer.status_code == 431 and answer.headers["content-type"] == "application/problem+json"
    finally:
        server.stop()


def head_flood_answer(server: BackgroundServer) -> bytes:
    """What the server answers a head that never ends, sent until it is cut off (at most 64 times h11's bound)."""
    with connect(server) as sock:
        sock.sendall(b"GET /chat-history HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: ")
        sent = 0
        try:
            while sent < 64 * MAX_HEAD_BYTES:  # bounded: 64 times the limit
                sock.sendall(b"a" * 8192)
                sent += 8192
        except OSError:  # closed while we sent: the answer may have come first
            pass
        try:
            return read_until_closed(sock)
        except ConnectionResetError:
            return b""


def test_connection_settings_are_checked() -> None:
    for name in ("keep_alive_timeout", "body_timeout", "store_timeout"):
        with pytest.raises(ValueError, match=name):
            ServiceSettings(**{name: 0})
    with pytest.raises(ValueError, match="max_connections"):
        ServiceSettings(max_connections=0)


def test_serve_flags_set_the_bounds() -> None:
    from chatlab.cli import _settings, build_parser

    flags = ["--store-timeout", "2", "--keep-alive-timeout", "3", "--body-timeout", "6"]
    flags += ["--max-connections", "7", "--allowed-host", "a.example", "--allowed-host", "b.example"]
    settings = _settings(build_parser().parse_args(["serve", *flags]))
    assert (settings.store_timeout, settings.keep_alive_timeout) == (2, 3)
    assert (settings.body_timeout, settings.max_connections) == (6, 7)
    assert settings.allowed_hosts == ("a.example", "b.example")
