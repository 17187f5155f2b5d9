"""Summary checkpoints and forks over real HTTP, with each store behind the service (docs/conversations.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx

CHECKPOINT = "chatlab.summaryThrough"


def text(role: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "contents": [{"$type": "text", "text": value}], **extra}


def append(http: httpx.Client, key: str, messages: list[dict[str, Any]]) -> None:
    response = http.post(f"/chat-history/{key}", json={"messages": messages})
    assert response.status_code == 202, response.text


def compact(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def test_the_summary_view_answers_the_last_checkpoint_and_what_follows(http: httpx.Client) -> None:
    first = [text("user", f"q{i}") for i in range(1, 4)]
    checkpoint = text("assistant", "summary of 1..3", additionalProperties={CHECKPOINT: 3})
    later = [text("user", "q4"), text("assistant", "a4")]
    append(http, "long", first)
    plain = http.get("/chat-history/long?view=summary")  # no checkpoint yet: the whole conversation
    assert plain.json() == first and plain.headers["x-message-count"] == "3"
    append(http, "long", [checkpoint, *later])

    view = http.get("/chat-history/long?view=summary")
    assert view.status_code == 200
    assert view.json() == [checkpoint, *later]
    whole = http.get("/chat-history/long")
    assert whole.json() == [*first, checkpoint, *later]  # the plain GET still answers everything
    assert view.headers["etag"] == whole.headers["etag"] and view.headers["x-message-count"] == "6"

    second = text("assistant", "summary of 1..6", additionalProperties={CHECKPOINT: 6})
    append(http, "long", [second, text("user", "q5")])
    assert http.get("/chat-history/long?view=summary").json() == [second, text("user", "q5")]
    page = http.get("/chat-history/long?view=summary&after=1&limit=1")  # a page of the view
    assert page.json() == [text("user", "q5")] and "link" not in page.headers
    first_page = http.get("/chat-history/long?view=summary&limit=1")
    assert first_page.json() == [second] and "view=summary&after=1&limit=1" in first_page.headers["link"]


def test_a_bad_view_is_refused(http: httpx.Client) -> None:
    assert http.get("/chat-history/k?view=everything").status_code == 400
    assert http.get("/chat-history/unknown?view=summary").json() == []


def test_a_fork_holds_the_first_n_messages_byte_for_byte(http: httpx.Client) -> None:
    messages = [text("user", "今の日時は？ é"), text("assistant", "a", messageId="m-2"), text("user", "b")]
    append(http, "origin", messages)
    forked = http.post("/chat-history/origin/fork?through=2")
    assert forked.status_code == 201, forked.text
    location = forked.headers["location"]
    assert location.startswith("/chat-history/") and location != "/chat-history/origin"
    copy = http.get(location)
    assert copy.content == b"[" + b",".join(compact(m) for m in messages[:2]) + b"]"
    assert copy.headers["x-message-count"] == "2"

    everything = http.post("/chat-history/origin/fork")  # through defaults to all
    assert http.get(everything.headers["location"]).json() == messages
    append(http, location.rsplit("/", 1)[1], [text("user", "only in the fork")])
    assert http.get("/chat-history/origin").json() == messages  # the two go their own ways


def test_a_retried_fork_answers_the_same_copy(http: httpx.Client) -> None:
    append(http, "origin", [text("user", "x")])
    headers = {"Idempotency-Key": '"fork-1"'}
    first = http.post("/chat-history/origin/fork", headers=headers)
    again = http.post("/chat-history/origin/fork", headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.headers["location"] == again.headers["location"]
    assert http.get(first.headers["location"]).json() == [text("user", "x")]  # copied once
    listed = [s["conversationKey"] for s in http.get("/chat-history").json()]
    assert len(listed) == 2


def test_a_fork_that_cannot_be_made_is_refused(http: httpx.Client) -> None:
    assert http.post("/chat-history/nothing-here/fork").status_code == 404
    append(http, "short", [text("user", "x")])
    too_far = http.post("/chat-history/short/fork?through=2")
    assert too_far.status_code == 422 and "holds 1 messages" in too_far.text
    assert http.post("/chat-history/short/fork?through=0").status_code == 400
    assert http.post("/chat-history/short/fork?after=1").status_code == 400
    assert [s["conversationKey"] for s in http.get("/chat-history").json()] == ["short"]  # nothing made


def test_the_openapi_description_has_the_view_and_the_fork(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert "post" in paths["/chat-history/{conversationKey}/fork"]
    names = [p["name"] for p in paths["/chat-history/{conversationKey}"]["get"]["parameters"]]
    assert "view" in names
