"""Every limit just under and just over, over real HTTP; the rate limit; settings from the environment."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.service.security import RateLimit, RateLimiter
from chatlab.stores import InMemoryChatHistoryStore

KEY = "k1"
URL = f"/chat-history/{KEY}"


def message(text: str) -> dict:
    return {"role": "user", "contents": [{"$type": "text", "text": text}]}


def compact(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def body_of_size(size: int) -> bytes:
    """A valid append body of exactly ``size`` bytes (JSON padded with spaces: one small message)."""
    body = compact({"messages": [message("x")]})
    return body + b" " * (size - len(body))


def message_of_size(size: int) -> dict:
    """A message whose compact JSON (as the service stores it) is exactly ``size`` bytes."""
    return message("é" * ((size - len(compact(message("")))) // 2) + "x" * ((size - len(compact(message("")))) % 2))


def serve(settings: ServiceSettings) -> BackgroundServer:
    return BackgroundServer(create_app(InMemoryChatHistoryStore(), settings), name="limits").start()


@pytest.fixture(scope="module")
def limited() -> Iterator[httpx.Client]:
    settings = ServiceSettings(
        max_body_bytes=1000, max_messages=3, max_message_bytes=200, key_pattern=r"^[a-z]+$", key_max_length=8
    )
    server = serve(settings)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client
    server.stop()


JSON = {"content-type": "application/json"}


def post(client: httpx.Client, body: bytes, key: str = "conv") -> httpx.Response:
    client.delete(f"/chat-history/{key}")
    return client.post(f"/chat-history/{key}", content=body, headers={"content-type": "application/json"})


def test_body_size_just_under_and_just_over(limited: httpx.Client) -> None:
    assert len(body_of_size(1000)) == 1000
    for method in ("POST", "PUT"):
        ok = limited.request(method, "/chat-history/conv", content=body_of_size(1000), headers=JSON)
        assert ok.is_success, ok.text
        over = limited.request(method, "/chat-history/conv", content=body_of_size(1001), headers=JSON)
        assert over.status_code == 413
        assert over.json()["title"] == "Content Too Large" and "1000 bytes" in over.json()["detail"]


def test_messages_per_request_just_under_and_just_over(limited: httpx.Client) -> None:
    assert post(limited, compact({"messages": [message("m")] * 3})).status_code == 202
    over = post(limited, compact({"messages": [message("m")] * 4}))
    assert over.status_code == 413 and "limit is 3" in over.json()["detail"]
    assert limited.get("/chat-history/conv").json() == []


def test_message_size_just_under_and_just_over(limited: httpx.Client) -> None:
    at_limit, over_limit = message_of_size(200), message_of_size(201)
    assert len(compact(at_limit)) == 200 and len(compact(over_limit)) == 201
    assert post(limited, compact({"messages": [at_limit]})).status_code == 202
    # measured as stored (compact JSON), not as sent: spaces in the request do not count
    assert post(limited, json.dumps({"messages": [at_limit]}, indent=4).encode()).status_code == 202
    over = post(limited, compact({"messages": [message("ok"), over_limit]}))
    assert over.status_code == 413
    assert "messages[1] is 201 bytes" in over.json()["detail"]
    assert limited.get("/chat-history/conv").json() == []  # a refused batch changes nothing


def test_conversation_key_pattern_and_length_just_under_and_just_over(limited: httpx.Client) -> None:
    body = compact({"messages": [message("m")]})
    assert post(limited, body, key="abcdefgh").status_code == 202
    for bad in ("abcdefghi", "abc1", "ABC", "a-b"):
        for method in ("GET", "POST", "PUT", "DELETE"):
            response = limited.request(
                method, f"/chat-history/{bad}", content=body if method in ("POST", "PUT") else None, headers=JSON
            )
            assert response.status_code == 400, (bad, method)
            assert "^[a-z]+$" in response.json()["detail"] and "8 characters" in response.json()["detail"]
    parameter = limited.get("/openapi.json").json()["paths"]["/chat-history/{conversationKey}"]["get"]["parameters"][0]
    assert parameter["schema"]["pattern"] == "^[a-z]+$" and parameter["schema"]["maxLength"] == 8


def test_rate_limit_per_key_answers_429_with_retry_after() -> None:
    alice, bob = "alice-0123456789abcdef", "bob-0123456789abcdef"
    settings = ServiceSettings(api_keys={alice: "alice", bob: "bob"}, rate_limit=RateLimit(rate=1 / 3600, burst=3))
    with serve(settings) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        as_alice = {"Authorization": f"Bearer {alice}"}
        for _ in range(3):  # the burst: just under
            assert client.get("/chat-history", headers=as_alice).status_code == 200
        over = client.post(URL, json={"messages": [message("m")]}, headers=as_alice)  # just over
        assert over.status_code == 429
        assert over.headers["content-type"] == "application/problem+json"
        assert over.json()["title"] == "Too Many Requests"
        assert 3000 < int(over.headers["retry-after"]) <= 3600
        assert client.get("/chat-history", headers={"Authorization": f"Bearer {bob}"}).status_code == 200  # own bucket
        assert (
            client.get(URL, headers={"Authorization": f"Bearer {bob}"}).json() == []
        )  # the refused POST wrote nothing
        # requests without a valid key share their client's bucket: key guessing is slowed down too
        statuses = [
            client.get("/chat-history", headers={"Authorization": f"Bearer wrong{i:020d}"}).status_code
            for i in range(4)
        ]
        assert statuses == [401, 401, 401, 429]


def test_rate_limit_without_keys_counts_per_client() -> None:
    with serve(ServiceSettings(rate_limit="2/h")) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        assert [client.get("/chat-history").status_code for _ in range(3)] == [200, 200, 429]
        spec = client.get("/openapi.json").json()
        assert "Retry-After" in spec["paths"]["/chat-history"]["get"]["responses"]["429"]["headers"]


def test_token_bucket_refills_at_the_rate() -> None:
    now = [100.0]
    limiter = RateLimiter(RateLimit(rate=2.0, burst=2), clock=lambda: now[0])
    assert [limiter.take("a"), limiter.take("a")] == [0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)  # a token is back in 1/rate seconds
    now[0] += 0.25
    assert limiter.take("a") == pytest.approx(0.25)
    now[0] += 0.25
    assert limiter.take("a") == 0.0
    now[0] += 60  # refills to the burst, not beyond
    assert [limiter.take("a") for _ in range(3)][2] > 0
    assert limiter.take("b") == 0.0


@pytest.mark.parametrize(
    ("spec", "rate", "burst"), [("10/s", 10.0, 10), ("600/min", 10.0, 600), ("30/h", 30 / 3600, 30), ("0.5/s", 0.5, 1)]
)
def test_rate_limit_specs(spec: str, rate: float, burst: int) -> None:
    parsed = RateLimit.parse(spec)
    assert parsed.rate == pytest.approx(rate) and parsed.burst == burst
    assert RateLimit.parse(spec, burst=7).burst == 7


@pytest.mark.parametrize("spec", ["10", "10/fortnight", "-1/s", "0/s", "ten/s"])
def test_bad_rate_limit_specs_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="N/s"):
        RateLimit.parse(spec)


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice:alice-0123456789abcdef\n")
    for name, value in {
        "CHATLAB_MAX_BODY_BYTES": "5000",
        "CHATLAB_MAX_MESSAGES": "7",
        "CHATLAB_MAX_MESSAGE_BYTES": "900",
        "CHATLAB_KEY_PATTERN": "^[0-9a-f]{32}$",
        "CHATLAB_KEY_MAX_LENGTH": "32",
        "CHATLAB_API_KEYS": "bob:bob-0123456789abcdef",
        "CHATLAB_API_KEYS_FILE": str(keys),
        "CHATLAB_CORS_ORIGINS": "https://a.example, https://b.example",
        "CHATLAB_RATE_LIMIT": "120/min",
        "CHATLAB_RATE_BURST": "5",
        "CHATLAB_IDEMPOTENCY_TTL": "60",
    }.items():
        monkeypatch.setenv(name, value)
    s = ServiceSettings()
    assert (s.max_body_bytes, s.max_messages, s.max_message_bytes, s.key_max_length) == (5000, 7, 900, 32)
    assert s.key_pattern == "^[0-9a-f]{32}$"
    assert s.api_keys.namespaces == ["alice", "bob"]
    assert s.cors_origins == ("https://a.example", "https://b.example")
    assert s.rate_limit == RateLimit(rate=2.0, burst=5)
    assert s.idempotency_ttl == 60.0
    assert "alice-0123456789abcdef" not in repr(s)


def test_defaults_are_the_articles(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHATLAB_API_KEYS", "CHATLAB_API_KEYS_FILE", "CHATLAB_CORS_ORIGINS", "CHATLAB_RATE_LIMIT"):
        monkeypatch.delenv(name, raising=False)
    s = ServiceSettings()
    assert s.api_keys is None and s.cors_origins == () and s.rate_limit is None and s.max_message_bytes is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_body_bytes": 0}, "max_body_bytes"),
        ({"key_pattern": "["}, "not a regular expression"),
        ({"rate_limit": "fast"}, "invalid rate limit"),
        ({"api_keys": {"short": "alice"}}, "shorter than 16"),
        ({"idempotency_ttl": 0}, "idempotency_ttl"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServiceSettings(**kwargs)
