"""Requests an adversarial run found answered wrongly: each now gets a clear 4xx (never a 5xx), over real HTTP.

Deep bodies, non-ASCII and control-character keys, ambiguous heads, made-up methods against ``/metrics``,
``/readyz`` naming the store, ``/docs`` off by default, ``serve`` on a port in use. Raw sockets where an HTTP
client would not send the request.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service
from chatlab.stores import InMemoryChatHistoryStore, StoreError

TEXT = {"role": "user", "contents": [{"$type": "text", "text": "hello"}]}


def raw(server: BackgroundServer, request: bytes) -> bytes:
    """What the server answers to ``request`` on a fresh connection, until it closes it."""
    with socket.create_connection(("127.0.0.1", server.port or 0), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("spaced", [False, True])
def test_a_deeply_nested_body_gets_400_not_500(http: httpx.Client, spaced: bool) -> None:
    """A compact 2 KB body with 1,000 nested arrays went past the quick path's error handling (a 500)."""
    nested = (b"[ " if spaced else b"[") * 1000 + b"]" * 1000
    body = b'{"messages":[{"role":"user","contents":[{"$type":"text","text":"x","deep":' + nested + b"}]}]}"
    response = http.post("/chat-history/k", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert "nested too deeply" in response.json()["detail"]
    assert http.get("/chat-history").json() == []


@pytest.fixture
def unicode_keys() -> Iterator[httpx.Client]:
    server = start_service(store=InMemoryChatHistoryStore(), settings=ServiceSettings(key_pattern=r"^\w+$"))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()


def test_a_non_ascii_key_gets_202_once_with_a_percent_encoded_location(unicode_keys: httpx.Client) -> None:
    path = "/chat-history/" + quote("日本", safe="")
    response = unicode_keys.post(path, json={"messages": [TEXT]})
    assert response.status_code == 202, response.text
    assert response.headers["location"] == path
    assert len(unicode_keys.get(response.headers["location"]).json()) == 1  # the Location reads it back
    page = unicode_keys.get(path, params={"after": 0, "limit": 1})
    assert "link" not in page.headers and page.json() == [TEXT]
    unicode_keys.post(path, json={"messages": [TEXT]})
    assert unicode_keys.get(path, params={"limit": 1}).headers["link"].startswith(f"<{path}?after=1")


@pytest.mark.parametrize("character", ["%00", "%0A", "%7F", "%C2%85"])
def test_a_key_with_a_control_character_gets_400(character: str) -> None:
    """Whatever the key pattern allows, a control character (NUL: PostgreSQL refuses it for ever) is a 400."""
    server = start_service(store=InMemoryChatHistoryStore(), settings=ServiceSettings(key_pattern=r"^[^/]+$"))
    try:
        response = httpx.post(f"{server.url}/chat-history/a{character}b", json={"messages": [TEXT]}, timeout=30)
        assert response.status_code == 400 and "control character" in response.json()["detail"]
        assert httpx.get(f"{server.url}/chat-history", timeout=30).json() == []
    finally:
        server.stop()


def test_two_host_headers_are_refused(service: BackgroundServer) -> None:
    answer = raw(service, b"GET /chat-history HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]


def test_content_length_with_chunked_is_refused(service: BackgroundServer) -> None:
    body = b'{"messages":[]}'
    request = (
        b"POST /chat-history/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), len(body), body)
    )
    answer = raw(service, request)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert httpx.get(f"{service.url}/chat-history", timeout=30).json() == []


def _series(text: str) -> set[tuple[str, ...]]:
    return {
        (s.labels["method"], s.labels["route"])
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "chatlab_http_requests_total"
    }


def test_made_up_methods_and_paths_add_no_metrics_series() -> None:
    server = start_service(store=InMemoryChatHistoryStore(), settings=ServiceSettings(metrics=True))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for i in range(20):
                http.request(f"FLOOD{i}", "/chat-history/k")
                http.get(f"/nosuch/{i}")
            series = _series(http.get("/metrics").text)
    finally:
        server.stop()
    assert ("GET", "other") in series  # httptools refuses a made-up method itself; h11 lets the app count it
    assert series <= {("GET", "other"), ("other", "/chat-history/{conversationKey}")} | {("GET", "/metrics")}
    assert all(method in {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"} for method, _ in series)
    assert len(series) <= 3


def test_metrics_need_a_key_when_keys_are_on() -> None:
    key = "m" * 32
    server = start_service(settings=ServiceSettings(metrics=True, api_keys={key: "ops"}))
    try:
        assert httpx.get(f"{server.url}/metrics", timeout=30).status_code == 401
        wrong = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer nope"}, timeout=30)
        assert wrong.status_code == 401
        right = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert right.status_code == 200 and "chatlab_http_requests_total" in right.text
    finally:
        server.stop()


class _Unreachable(InMemoryChatHistoryStore):
    async def ping(self) -> None:
        raise StoreError("connection to server at db.internal.example (10.1.2.3), port 5432 failed: database secret")


def test_readyz_does_not_name_the_store() -> None:
    server = start_service(store=_Unreachable())
    try:
        response = httpx.get(f"{server.url}/readyz", timeout=30)
    finally:
        server.stop()
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert "store unavailable" in detail
    assert not any(word in response.text for word in ("db.internal", "10.1.2.3", "5432", "secret"))


def test_docs_are_off_by_default_and_served_when_asked() -> None:
    plain = start_service(store=InMemoryChatHistoryStore())
    asked = start_service(store=InMemoryChatHistoryStore(), settings=ServiceSettings(api_docs=True))
    try:
        assert httpx.get(f"{plain.url}/docs", timeout=30).status_code == 404
        assert httpx.get(f"{plain.url}/openapi.json", timeout=30).status_code == 200
        assert "swagger" in httpx.get(f"{asked.url}/docs", timeout=30).text.lower()
    finally:
        plain.stop()
        asked.stop()


def test_serve_on_a_port_in_use_says_so_before_any_banner() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "chatlab", "serve", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert result.returncode != 0
    assert f"port {port}" in result.stderr and "in use" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Chat history service on" not in result.stdout
