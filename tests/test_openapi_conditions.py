"""The OpenAPI description says exactly which condition headers each endpoint honours: this test reads the live
service's document and tries every documented header (a false ``If-Match`` is a 412 that changes nothing; a repeated
``Idempotency-Key`` is answered as the first time and writes nothing), and finds no 412 documented without it."""

from __future__ import annotations

from typing import Any

import httpx

BODIES: dict[tuple[str, str], Any] = {
    ("/chat-history/{conversationKey}", "post"): {
        "messages": [{"role": "user", "contents": [{"$type": "text", "text": "x"}]}]
    },
    ("/chat-history/{conversationKey}", "put"): {"messages": []},
    ("/chat-history/{conversationKey}", "patch"): {"title": "changed"},
}


def _state(http: httpx.Client) -> Any:
    """Everything a write could change: each conversation's summary (metadata included) and messages."""
    summaries = http.get("/chat-history").json()
    return [(s, http.get(f"/chat-history/{s['conversationKey']}").json()) for s in summaries]


def _send(http: httpx.Client, path: str, method: str, headers: dict[str, str]) -> httpx.Response:
    url = path.replace("{conversationKey}", "k")
    return http.request(method.upper(), url, json=BODIES.get((path, method)), headers=headers)


def _operations(http: httpx.Client) -> list[tuple[str, str, dict[str, Any]]]:
    paths = http.get("/openapi.json").json()["paths"]
    return [(path, method, operation) for path, methods in paths.items() for method, operation in methods.items()]


def test_every_documented_header_is_honoured(http: httpx.Client) -> None:
    honoured: dict[str, set[tuple[str, str]]] = {"If-Match": set(), "Idempotency-Key": set()}
    for path, method, operation in _operations(http):
        headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
        assert headers <= set(honoured), (path, method, headers)
        assert ("412" in operation["responses"]) == ("If-Match" in headers), (path, method)
        for name in headers:
            honoured[name].add((path, method))
            http.put("/chat-history/k", json=BODIES[("/chat-history/{conversationKey}", "post")])
            before = _state(http)
            if name == "If-Match":
                refused = _send(http, path, method, {"If-Match": '"stale.1"'})
                assert refused.status_code == 412, (path, method, refused.text)
                assert refused.headers["etag"] == http.get("/chat-history/k").headers["etag"]
                assert _state(http) == before, (path, method)
            else:
                key = {"Idempotency-Key": f"once-{method}-{len(path)}"}
                first = _send(http, path, method, key)
                after_first = _state(http)
                again = _send(http, path, method, key)
                assert first.status_code < 300 and again.status_code == first.status_code, (path, method)
                assert again.headers["idempotent-replayed"] == "true"
                assert again.headers["location"] == first.headers["location"]
                assert _state(http) == after_first, (path, method)
            for summary in http.get("/chat-history").json():
                http.delete(f"/chat-history/{summary['conversationKey']}")
    fork = ("/chat-history/{conversationKey}/fork", "post")
    conversation = "/chat-history/{conversationKey}"
    writes = {(conversation, "post"), (conversation, "put"), (conversation, "delete"), (conversation, "patch"), fork}
    assert honoured == {"If-Match": writes, "Idempotency-Key": {(conversation, "post"), fork}}
