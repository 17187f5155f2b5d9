"""CORS preflights allowed and refused; TLS with a self-signed certificate made here; the hardened CLI."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app, start_service
from chatlab.stores import InMemoryChatHistoryStore
from tests.summaries import article

ALLOWED = "https://app.example"
KEY = "alice-0123456789abcdef-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def preflight(
    client: httpx.Client,
    origin: str,
    method: str = "POST",
    headers: str = "authorization,content-type,if-match,idempotency-key",
) -> httpx.Response:
    return client.options(
        "/chat-history/k1",
        headers={"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers},
    )


@pytest.fixture(scope="module")
def cors_client() -> Iterator[httpx.Client]:
    settings = ServiceSettings(cors_origins=(ALLOWED,), api_keys={KEY: "alice"})
    with (
        BackgroundServer(create_app(InMemoryChatHistoryStore(), settings), name="cors") as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
    ):
        yield client


def test_preflight_from_an_allowed_origin(cors_client: httpx.Client) -> None:
    response = preflight(cors_client, ALLOWED)
    assert response.status_code == 200  # answered before authentication: a preflight carries no key
    assert response.headers["access-control-allow-origin"] == ALLOWED
    allowed_headers = response.headers["access-control-allow-headers"].lower()
    for header in ("authorization", "content-type", "if-match", "idempotency-key"):
        assert header in allowed_headers
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in response.headers


@pytest.mark.parametrize(
    ("origin", "method", "headers"),
    [
        ("https://evil.example", "POST", "authorization"),
        ("http://app.example", "POST", "authorization"),  # another scheme is another origin
        (ALLOWED, "TRACE", "authorization"),
        (ALLOWED, "POST", "x-custom"),
    ],
)
def test_preflight_refused(cors_client: httpx.Client, origin: str, method: str, headers: str) -> None:
    response = preflight(cors_client, origin, method, headers)
    assert response.status_code == 400
    if origin != ALLOWED:
        assert "access-control-allow-origin" not in response.headers


def test_actual_requests_carry_cors_headers_for_allowed_origins_only(cors_client: httpx.Client) -> None:
    ok = cors_client.get("/chat-history/k1", headers={"Origin": ALLOWED, **AUTH})
    assert ok.headers["access-control-allow-origin"] == ALLOWED
    assert "etag" in ok.headers["access-control-expose-headers"].lower()
    refused = cors_client.get("/chat-history/k1", headers={"Origin": ALLOWED})  # 401 readable by the page too
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ALLOWED
    other = cors_client.get("/chat-history/k1", headers={"Origin": "https://evil.example", **AUTH})
    assert "access-control-allow-origin" not in other.headers


def test_no_cors_by_default(http: httpx.Client) -> None:
    assert preflight(http, ALLOWED).status_code == 405
    assert "access-control-allow-origin" not in http.get("/chat-history", headers={"Origin": ALLOWED}).headers


# -- TLS -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_store() -> InMemoryChatHistoryStore:
    return InMemoryChatHistoryStore()


@pytest.fixture(scope="module")
def tls_service(pki: dict[str, Path], tls_store: InMemoryChatHistoryStore) -> Iterator[BackgroundServer]:
    server = start_service(port=0, store=tls_store, tls_cert=pki["cert"], tls_key=pki["key"])
    yield server
    server.stop()


def test_tls_serves_https_that_verifies_against_the_ca(tls_service: BackgroundServer, pki: dict[str, Path]) -> None:
    assert tls_service.url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    with httpx.Client(base_url=tls_service.url, verify=context, timeout=10) as client:
        assert client.post("/chat-history/k1", json={"messages": [{"role": "user", "contents": []}]}).status_code == 202
        assert article(client.get("/chat-history").json()) == [{"conversationKey": "k1", "messageCount": 1}]


def test_start_service_never_takes_a_plain_server_for_a_tls_one(
    tls_service: BackgroundServer, pki: dict[str, Path], tls_store: InMemoryChatHistoryStore
) -> None:
    plain = start_service(port=0, store=tls_store)
    try:
        assert plain.url.startswith("http://") and plain is not tls_service
        again = start_service(port=0, store=tls_store, tls_cert=pki["cert"], tls_key=pki["key"])  # a re-run cell
        assert again is tls_service
    finally:
        plain.stop()


def test_a_client_that_verifies_refuses_an_unknown_certificate(tls_service: BackgroundServer) -> None:
    with (
        httpx.Client(base_url=tls_service.url, timeout=10) as client,  # default CAs: ours is not among them
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get("/chat-history")


def test_a_background_server_serves_tls_with_an_encrypted_key(pki: dict[str, Path], tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(pki["key"].read_bytes(), password=None)
    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"open sesame"),
        )
    )
    app = create_app(InMemoryChatHistoryStore())
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    tls = {"ssl_certfile": pki["cert"], "ssl_keyfile": encrypted}
    with (
        BackgroundServer(app, name="tls-password", ssl_keyfile_password="open sesame", **tls) as server,
        httpx.Client(base_url=server.url, verify=context, timeout=10) as client,
    ):
        assert server.url.startswith("https://") and client.get("/chat-history").json() == []
    wrong = BackgroundServer(app, name="tls-wrong-password", ssl_keyfile_password="not it", **tls)
    with pytest.raises(RuntimeError, match="failed to start"):
        wrong.start()


def test_plain_http_to_the_tls_port_gets_no_history(tls_service: BackgroundServer) -> None:
    with httpx.Client(base_url=tls_service.url.replace("https://", "http://"), timeout=10) as client:
        try:
            response = client.get("/chat-history")
        except httpx.HTTPError:
            return
        assert response.status_code >= 400


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_with_tls_and_api_keys_file(pki: dict[str, Path], tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# namespace:key\nalice:{KEY}\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLAB_")}
    process = subprocess.Popen(
        [
            sys.executable, "-m", "chatlab", "serve", "--port", str(port), "--log-level", "warning",
            "--tls-cert", str(pki["cert"]), "--tls-key", str(pki["key"]), "--api-keys-file", str(keys),
            "--rate-limit", "100/s", "--cors-origin", ALLOWED, "--max-message-bytes", "4096",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    try:
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=context, timeout=10) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    response = client.get("/chat-history")
                    break
                except httpx.ConnectError:
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline, "service did not start"
                    time.sleep(0.1)
            assert response.status_code == 401
            assert client.get("/chat-history", headers=AUTH).json() == []
            assert preflight(client, ALLOWED).headers["access-control-allow-origin"] == ALLOWED
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert f"https://127.0.0.1:{port}" in out
    assert "API keys for namespaces alice" in out and "rate limit 100/s" in out
    assert KEY not in out + err


def test_serve_refuses_half_a_tls_configuration(pki: dict[str, Path]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chatlab", "serve", "--tls-cert", str(pki["cert"])],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and "--tls-key" in result.stderr


def test_api_key_command_prints_a_usable_entry() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chatlab", "api-key", "alice"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    from chatlab.service.security import ApiKeys

    keys = ApiKeys.parse(result.stdout)
    assert keys.namespaces == ["alice"]
