"""Notebook 1's app (the article's server, written in its cells) and ``chatlab.service`` answer the article alike.

This was a comparison table in the notebook; it is a test now, so the lesson shows the calls and this holds the rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import nbformat

from chatlab.runner import BackgroundServer

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_chat_history_service.ipynb"
# the cells that define the contracts, the store and the routes: plain Python, no await
DEFINES = ("class AppendChatMessagesRequest", "class InMemoryChatHistoryStore", "app = FastAPI", "@app.post")

QUESTION = {"role": "user", "contents": [{"$type": "text", "text": "現在時刻を教えてください"}]}
CALL = {"$type": "functionCall", "callId": "call_1", "name": "GetDateTime", "arguments": {}}
ANSWER = [
    {"authorName": "SampleAgent", "role": "assistant", "contents": [CALL]},
    {"role": "tool", "contents": [{"$type": "functionResult", "callId": "call_1", "result": "2026-04-16 01:30:52"}]},
    {
        "authorName": "SampleAgent",
        "role": "assistant",
        "contents": [{"$type": "text", "text": "現在の日時は ... です。"}],
    },
]
FIRST, SECOND, UNKNOWN = "0" * 31 + "1", "0" * 31 + "2", "f" * 32
CALLS: list[tuple[str, str, Any]] = [
    ("GET", "/", None),
    ("GET", "/chat-history", None),
    ("POST", f"/chat-history/{FIRST}", {"messages": [QUESTION]}),
    ("POST", f"/chat-history/{FIRST}", {"messages": ANSWER}),
    ("POST", f"/chat-history/{SECOND}", {"messages": []}),  # an empty append stores nothing
    ("GET", f"/chat-history/{FIRST}", None),
    ("GET", f"/chat-history/{UNKNOWN}", None),  # an unknown key reads as []
    ("GET", "/chat-history", None),
    ("PUT", f"/chat-history/{FIRST}", {"messages": [QUESTION]}),
    ("PUT", f"/chat-history/{SECOND}", {"messages": []}),  # an empty replace creates an empty conversation
    ("GET", "/chat-history", None),
    ("DELETE", f"/chat-history/{FIRST}", None),
    ("DELETE", f"/chat-history/{UNKNOWN}", None),
    ("GET", "/chat-history", None),
]


def notebook_app() -> Any:
    """The FastAPI app notebook 1 builds, from its own cells."""
    namespace: dict[str, Any] = {}
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        if cell.cell_type == "code" and any(marker in cell.source for marker in DEFINES):
            # dont_inherit: the cells run as written, without this module's ``from __future__ import annotations``
            exec(compile(cell.source, NOTEBOOK.name, "exec", dont_inherit=True), namespace)
    return namespace["app"]


def on_the_contract(body: Any) -> Any:
    """A summary list with the article's two fields only: chatlab adds times, which the article's client ignores."""
    if isinstance(body, list) and body and isinstance(body[0], dict) and "messageCount" in body[0]:
        return [{"conversationKey": s["conversationKey"], "messageCount": s["messageCount"]} for s in body]
    return body


def answers(base_url: str) -> list[tuple[int, str | None, Any]]:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        replies = [client.request(method, path, json=body) for method, path, body in CALLS]
    return [
        (r.status_code, r.headers.get("location"), on_the_contract(json.loads(r.content or b"null"))) for r in replies
    ]


def test_the_notebooks_app_and_chatlabs_service_answer_the_article_alike(service: BackgroundServer) -> None:
    with BackgroundServer(notebook_app(), name="notebook-1-app") as article:
        theirs = answers(article.url)
    ours = answers(service.url)
    for call, mine, chatlabs in zip(CALLS, theirs, ours, strict=True):
        assert mine == chatlabs, f"{call[0]} {call[1]}: notebook 1's app {mine}, chatlab.service {chatlabs}"
    assert theirs[-1] == (200, None, [{"conversationKey": SECOND, "messageCount": 0}])
