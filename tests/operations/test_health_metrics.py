"""/healthz, /readyz and /metrics over real HTTP: open, outside the rate limit, and true to the store."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chatlab.service import ServiceSettings, start_service
from chatlab.stores import InMemoryChatHistoryStore
from tests.faults import PausableProxy

KEY = "s" * 32


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_readyz_is_503_while_the_database_does_not_answer(backend, request) -> None:
    url = request.getfixturevalue(f"{backend}_url")
    proxy = PausableProxy(urlsplit(url).port or (5432 if backend == "postgres" else 6379))
    server = start_service(store=_through(url, proxy.port), settings=ServiceSettings(api_keys={KEY: "ops"}))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.get("/readyz").status_code == 200  # no API key needed
            proxy.pause()
            paused = http.get("/readyz")
            assert paused.status_code == 503
            assert paused.headers["content-type"] == "application/problem+json"
            assert "did not answer" in paused.json()["detail"]
            assert http.get("/healthz").status_code == 200  # the process still answers
            proxy.resume()
            statuses = [http.get("/readyz").status_code for _ in range(3)]
            assert statuses[-1] == 200, statuses
    finally:
        server.stop()
        proxy.close()


def test_health_is_open_and_outside_the_rate_limit() -> None:
    settings = ServiceSettings(api_keys={KEY: "ops"}, rate_limit="1/h", metrics=True)
    server = start_service(settings=settings)
    try:
        with httpx.Client(base_url=server.url) as http:
            authorized = {"Authorization": f"Bearer {KEY}"}
            for path in ("/healthz", "/readyz") * 3:
                assert http.get(path).status_code == 200, path
            for _ in range(3):  # /metrics: behind a key when keys are on, outside the rate limit
                assert http.get("/metrics", headers=authorized).status_code == 200
            assert http.get("/metrics").status_code == 401
            assert http.get("/chat-history").status_code == 401
            assert http.get("/chat-history", headers=authorized).status_code == 200
            assert http.get("/chat-history", headers=authorized).status_code == 429
    finally:
        server.stop()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_the_requests_made() -> None:
    server = start_service(store=InMemoryChatHistoryStore(), settings=ServiceSettings(metrics=True))
    try:
        with httpx.Client(base_url=server.url) as http:
            assert http.get("/metrics").status_code == 200
            for _ in range(2):
                http.post("/chat-history/a", json={"messages": [{"role": "user", "contents": []}]})
            for _ in range(3):
                http.get("/chat-history/a")
            http.get("/chat-history")
            http.post("/chat-history/a", content=b"nope", headers={"Content-Type": "application/json"})
            samples = _samples(http.get("/metrics").text)
    finally:
        server.stop()
    route = "/chat-history/{conversationKey}"

    def requests(method: str, path: str, status: str) -> float:
        labels = (("method", method), ("route", path), ("status", status))
        return samples.get(("chatlab_http_requests_total", labels), 0)

    assert requests("POST", route, "202") == 2
    assert requests("POST", route, "400") == 1
    assert requests("GET", route, "200") == 3
    assert requests("GET", "/chat-history", "200") == 1
    assert requests("GET", "/metrics", "200") == 1  # the first scrape; the second is counted after it answers
    latency = samples[("chatlab_http_request_duration_seconds_count", (("method", "GET"), ("route", route)))]
    assert latency == 3
    assert samples[("chatlab_store_operation_duration_seconds_count", (("operation", "append"),))] == 2
    assert samples[("chatlab_store_operation_duration_seconds_count", (("operation", "read"),))] == 3
    assert samples[("chatlab_conversations", ())] == 1
    assert samples[("chatlab_messages", ())] == 2
