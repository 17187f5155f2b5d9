"""The service's operations, each as a request to send and the meaning of its answer: what both clients share."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import unquote, urlencode

import httpx

from ..vocabulary import ConversationSummary, Version, conversation_path
from .errors import (
    ChatHistoryCodecError,
    ChatHistoryServiceConflict,
    ChatHistoryServiceProtocolError,
    ChatHistoryServiceStatusError,
    ChatHistoryServiceUnavailable,
)

__all__ = [
    "IfMatch",
    "MessagesPage",
    "Operations",
    "OutgoingMessages",
    "Request",
    "SummariesPage",
    "encode_messages",
    "summary_from_json",
]

T = TypeVar("T")

OutgoingMessages = Sequence[Mapping[str, Any]] | bytes
"""Messages to send: MEAI ``ChatMessage`` JSON objects, or a JSON array of them already encoded."""

IfMatch = Version | str | None
"""A write's condition: the :class:`Version` it must find (``ETag``), ``"*"`` (it must exist), or none."""


@dataclass(frozen=True, slots=True)
class MessagesPage:
    """Messages as the service sent them (MEAI JSON; ``body``: the array as it came) with, from the same snapshot, the
    whole conversation's ``version`` (or ``None``) and ``count``; ``next_after``: where the next page starts."""

    messages: list[dict[str, Any]]
    version: Version | None
    count: int
    next_after: int | None = None
    body: bytes = field(default=b"[]", repr=False)


@dataclass(frozen=True, slots=True)
class MessagesBody:
    """A conversation's messages as the JSON array the service sent, unparsed, and its ``version`` (or ``None``)."""

    body: bytes = field(repr=False)
    version: Version | None


@dataclass(frozen=True, slots=True)
class SummariesPage:
    """A page of summaries, and the key the next page starts after (``Link: rel="next"``; ``None``: the last)."""

    summaries: list[ConversationSummary]
    next_after: str | None = None


@dataclass(frozen=True)
class Request(Generic[T]):
    """One request to the service, and how to read its successful answer."""

    method: str
    url: str
    read: Callable[[httpx.Response], T]
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None

    @property
    def what(self) -> str:
        """``METHOD URL``, as errors name the request."""
        return f"{self.method} {self.url}"

    def answer(self, response: httpx.Response) -> T:
        """What the answer means, or the error for a refusal (``412``: with the conversation's current version)."""
        if response.is_success:
            return self.read(response)
        status = response.status_code
        detail = _detail(response)
        if status == 412:
            conflict = ChatHistoryServiceConflict.for_response(self.method, self.url, status, detail)
            conflict.current = Version.from_etag(response.headers.get("etag"))
            raise conflict
        raise ChatHistoryServiceStatusError.for_response(self.method, self.url, status, detail)

    def unanswered(self, exc: httpx.HTTPError) -> ChatHistoryServiceUnavailable:
        """The error for a request that got no answer."""
        if isinstance(exc, httpx.TimeoutException):
            reason = f"timed out: {type(exc).__name__}"
        else:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return ChatHistoryServiceUnavailable.for_request(self.method, self.url, reason)


class Operations:
    """The requests of the service at ``url`` (routes: docs/conversations.md): keys quoted into one path segment."""

    def __init__(self, url: str) -> None:
        self.url = url

    def conversation_url(self, key: str) -> str:
        """The conversation's URL on the service."""
        return self.url + conversation_path(key)

    def read(
        self,
        key: str,
        after: int | None = None,
        limit: int | None = None,
        view: str | None = None,
        author: str | None = None,
    ) -> Request[MessagesPage]:
        """``GET``: the messages after the first ``after`` (at most ``limit``), optionally a ``view`` or one
        ``author``'s; the page says where the next one starts."""
        query: list[tuple[str, str | int | None]] = [("view", view), ("author", author)]
        query += [("after", _count("after", after)), ("limit", _count("limit", limit))]
        url = _query(self.conversation_url(key), query)
        return Request("GET", url, lambda response: _page(response, url, after or 0))

    def read_body(self, key: str) -> Request[MessagesBody]:
        """``GET``, the answer kept as the JSON array it came (never parsed: an export copies it byte for byte)."""
        url = self.conversation_url(key)
        return Request("GET", url, lambda response: MessagesBody(response.content, _version(response)))

    def participants(self, key: str) -> Request[dict[str, int]]:
        """Each author of the conversation's messages and how many it signed, the one with most first."""
        url = self.conversation_url(key) + "/participants"
        return Request("GET", url, lambda response: _participants(response, url))

    def fork(
        self,
        key: str,
        through: int | None,
        new_key: str | None = None,
        if_match: IfMatch = None,
        idempotency_key: str | None = None,
    ) -> Request[str]:
        """``POST .../fork``, with an ``Idempotency-Key`` (a new one unless given) that the retries keep, so a
        retried fork never makes two; ``new_key`` names the fork, ``if_match`` is the source's version."""
        query = [("through", _count("through", through)), ("key", new_key)]
        url = _query(self.conversation_url(key) + "/fork", query)
        headers = _idempotent(_condition(if_match), idempotency_key)
        return Request("POST", url, lambda response: _forked_key(response, url), headers)

    def head(self, key: str) -> Request[Version]:
        """``HEAD``: the conversation's version and count, no messages."""
        url = self.conversation_url(key)
        return Request("HEAD", url, lambda response: _head(response, url))

    def append(
        self, key: str, messages: OutgoingMessages, if_match: IfMatch, idempotency_key: str | None
    ) -> Request[Version | None]:
        """``POST``, with an ``Idempotency-Key`` (a new one unless given) that the retries keep."""
        return self._write("POST", key, messages, _idempotent(_condition(if_match), idempotency_key))

    def replace(self, key: str, messages: OutgoingMessages, if_match: IfMatch) -> Request[Version | None]:
        """``PUT``: the conversation's messages replaced (idempotent, so retried as it is)."""
        return self._write("PUT", key, messages, _condition(if_match))

    def delete(self, key: str, if_match: IfMatch) -> Request[None]:
        """``DELETE``: the conversation removed."""
        return Request("DELETE", self.conversation_url(key), lambda _: None, _condition(if_match))

    def summaries(
        self, after: str | None = None, limit: int | None = None, tags: Mapping[str, str] | None = None
    ) -> Request[SummariesPage]:
        """``GET /chat-history``: the conversations after ``after`` (at most ``limit``) carrying every tag asked."""
        tag_query = [("tag", f"{name}:{value}") for name, value in (tags or {}).items()]
        url = _query(f"{self.url}/chat-history", [("limit", _count("limit", limit)), ("after", after), *tag_query])
        return Request("GET", url, lambda response: _summaries(response, url))

    def patch(self, key: str, change: Mapping[str, Any]) -> Request[ConversationSummary]:
        """``PATCH``: title and tags changed by a JSON merge patch; the answer is the conversation's summary."""
        url = self.conversation_url(key)
        body = json.dumps(dict(change), ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        return Request("PATCH", url, lambda response: summary_from_json(_json(response, url), url), headers, body)

    def _write(
        self, method: str, key: str, messages: OutgoingMessages, headers: dict[str, str]
    ) -> Request[Version | None]:
        array = messages if isinstance(messages, bytes) else encode_messages(messages)
        headers["Content-Type"] = "application/json"
        return Request(method, self.conversation_url(key), _version, headers, b'{"messages":' + array + b"}")


def encode_messages(messages: Sequence[Mapping[str, Any]]) -> bytes:
    """Messages as the compact UTF-8 JSON array the service stores; a value JSON cannot hold is refused here."""
    try:
        return json.dumps(list(messages), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ChatHistoryCodecError(f"the messages cannot be written as JSON ({exc}); nothing was sent") from exc


def _count(name: str, value: int | None) -> int | None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise ValueError(f"{name} must be a whole number of 0 or more, not {value!r}")
    return value


def _query(url: str, query: list[tuple[str, str | int | None]]) -> str:
    """``url`` with the query's parameters that have a value."""
    given = [(name, value) for name, value in query if value is not None]
    return f"{url}?{urlencode(given)}" if given else url


def _idempotent(headers: dict[str, str], idempotency_key: str | None) -> dict[str, str]:
    """``headers`` with an ``Idempotency-Key`` (a new one unless given): the request's retries keep it, so a retried
    append or fork is done once."""
    headers["Idempotency-Key"] = f'"{idempotency_key or uuid.uuid4()}"'
    return headers


def _condition(if_match: IfMatch) -> dict[str, str]:
    if if_match is None:
        return {}
    return {"If-Match": if_match.etag if isinstance(if_match, Version) else if_match}


def _version(response: httpx.Response) -> Version | None:
    return Version.from_etag(response.headers.get("etag"))


def _json(response: httpx.Response, url: str) -> Any:
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise ChatHistoryServiceProtocolError.for_answer(url, "the answer is not JSON") from exc


def _page(response: httpx.Response, url: str, after: int) -> MessagesPage:
    data = _json(response, url)
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ChatHistoryServiceProtocolError.for_answer(url, "the answer is not a JSON array of messages")
    count = response.headers.get("x-message-count", "")
    next_after = _next_after(response) or ""
    return MessagesPage(
        data,
        _version(response),
        int(count) if count.isdigit() else after + len(data),
        int(next_after) if next_after.isdigit() else None,
        response.content,
    )


def _next_after(response: httpx.Response) -> str | None:
    """Where the next page starts: the ``after`` of the answer's ``Link: rel="next"``."""
    following = response.links.get("next", {}).get("url")
    return httpx.URL(following).params.get("after") if following else None


def _forked_key(response: httpx.Response, url: str) -> str:
    """The new conversation's key, from the fork's ``Location: /chat-history/{newKey}``."""
    prefix, _, key = response.headers.get("location", "").rpartition("/")
    if response.status_code != 201 or prefix != "/chat-history":
        raise ChatHistoryServiceProtocolError.for_answer(
            url, "a fork's answer is 201 with Location /chat-history/{key}"
        )
    return unquote(key)


def _participants(response: httpx.Response, url: str) -> dict[str, int]:
    """``{authorName: messageCount}`` from the answer's ``participants``, in its order."""
    data = _json(response, url)
    rows = data.get("participants") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ChatHistoryServiceProtocolError.for_answer(url, "the answer has no list of participants")
    return _participant_counts(rows)


def _participant_counts(rows: list[Any]) -> dict[str, int]:
    """``{authorName: messageCount}`` from a list of participants (``/participants``, a summary's), in its order."""
    return {str(row.get("authorName")): int(row.get("messageCount", 0)) for row in rows}


def _head(response: httpx.Response, url: str) -> Version:
    version = _version(response)
    if version is None or response.headers.get("x-message-count") != str(version.count):
        raise ChatHistoryServiceProtocolError.for_answer(url, "HEAD gave no ETag and X-Message-Count")
    return version


def _summaries(response: httpx.Response, url: str) -> SummariesPage:
    data = _json(response, url)
    if not isinstance(data, list):
        raise ChatHistoryServiceProtocolError.for_answer(url, "the answer is not a JSON array")
    return SummariesPage([summary_from_json(item, url) for item in data], _next_after(response))


def summary_from_json(item: Any, url: str) -> ConversationSummary:
    """One conversation of a ``GET /chat-history`` or ``PATCH`` answer; what an older service omits stays unknown."""
    try:
        return ConversationSummary(
            str(item["conversationKey"]),
            int(item["messageCount"]),
            created_at=_seconds(item.get("createdAt")),
            updated_at=_seconds(item.get("updatedAt")),
            title=item.get("title"),
            tags=dict(item.get("tags") or {}),
            participants=_participant_counts(item.get("participants") or []),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ChatHistoryServiceProtocolError.for_answer(url, f"unexpected summary: {exc}") from exc


def _seconds(iso_time: str | None) -> float | None:
    """An ISO 8601 time of a summary as seconds since the epoch (the stores' unit); ``None`` if absent."""
    return None if iso_time is None else datetime.fromisoformat(iso_time).timestamp()


def _detail(response: httpx.Response) -> str:
    """The service's own explanation of an error, short."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300].strip()
    if isinstance(body, dict):  # the first of these it has
        body = next((body[key] for key in ("detail", "error", "message", "title") if key in body), body)
        if isinstance(body, str):
            return body
    return str(body)[:300]
