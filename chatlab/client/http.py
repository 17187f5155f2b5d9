"""Typed clients for the chat history service, async and blocking: they differ only in how they send (requests and
answers: :mod:`.operations`). An HTTP client they create is closed with them; one given is left open, as MAF's do."""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Generic, TypeVar

import httpx

from ..vocabulary import API_KEY_VARIABLE, DEFAULT_SERVICE_URL, SERVICE_URL_VARIABLE, ConversationSummary, Version
from .operations import IfMatch, MessagesBody, MessagesPage, Operations, OutgoingMessages, Request, SummariesPage
from .retry import RetryPolicy
from .tracing import note_bytes, trace_headers

__all__ = ["AsyncChatHistoryClient", "ChatHistoryClient", "Verify", "service_url"]

T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)

Verify = bool | str | os.PathLike[str] | ssl.SSLContext
"""TLS check: ``True`` (default CAs or ``SSL_CERT_FILE``), a CA bundle path, an ``SSLContext``, ``False`` (none)."""


def service_url(url: str | None = None) -> str:
    """The service URL: the argument, else ``CHAT_HISTORY_SERVICE_URL``, else ``http://localhost:5000``."""
    return (url or os.environ.get(SERVICE_URL_VARIABLE) or DEFAULT_SERVICE_URL).rstrip("/")


class _Client(Generic[H]):
    """What both clients hold: the HTTP client, the service's requests, the API key and the retry policy."""

    _http_class: type[H]  # the HTTP client created when none is given

    def __init__(
        self,
        url: str | None = None,
        *,
        http_client: H | None = None,
        api_key: str | None = None,
        verify: Verify | None = None,
        timeout: float | httpx.Timeout = 60.0,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 - immutable
    ) -> None:
        if http_client is not None and verify is not None:
            raise ValueError("verify applies to the HTTP client created here: set it on your http_client instead")
        if url is None and http_client is not None and str(http_client.base_url):
            url = str(http_client.base_url)
        self.url = service_url(url)
        self.operations = Operations(self.url)
        self.retry = retry or RetryPolicy(attempts=1)
        key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE) or None
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._owns_http = http_client is None
        if isinstance(verify, (str, os.PathLike)):  # a CA bundle: httpx takes it as an SSL context
            verify = ssl.create_default_context(cafile=os.fspath(verify))
        self.http: H = http_client or self._http_class(timeout=timeout, verify=True if verify is None else verify)

    def _headers_for(self, request: Request[Any]) -> dict[str, str]:
        """The client's headers, the request's, and the trace context of the span running now (if traced)."""
        return {**self._headers, **request.headers, **trace_headers()}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


class AsyncChatHistoryClient(_Client[httpx.AsyncClient]):
    """The chat history service, from async code (an agent, a notebook cell).

    Args:
        url, http_client: the service (default: ``http_client``'s ``base_url``, else :func:`service_url`'s), and a
            caller-owned ``httpx.AsyncClient`` to send with (left open by :meth:`aclose`).
        api_key: sent as ``Authorization: Bearer <key>``; default ``CHAT_HISTORY_SERVICE_API_KEY``.
        verify, timeout: of the HTTP client created here (:data:`Verify`; the article's timeout: 1 minute).
        retry: how transient failures are retried; ``None`` never retries.
    """

    _http_class = httpx.AsyncClient

    async def read(self, key: str) -> MessagesPage:
        """Every message of conversation ``key`` (``[]`` if it does not exist) and its version."""
        return await self._send(self.operations.read(key))

    async def read_after(self, key: str, after: int, limit: int | None = None) -> MessagesPage:
        """The messages after the first ``after`` (at most ``limit``); ``next_after`` says where more start."""
        return await self._send(self.operations.read(key, after, limit))

    async def read_body(self, key: str) -> MessagesBody:
        """The whole conversation as the JSON array the service sent, unparsed, with its version."""
        return await self._send(self.operations.read_body(key))

    async def read_summary(self, key: str) -> MessagesPage:
        """The latest summary checkpoint and what follows it; ``version``, ``count``: the whole conversation's."""
        return await self._send(self.operations.read(key, view="summary"))

    async def read_by_author(self, key: str, author: str, after: int = 0, limit: int | None = None) -> MessagesPage:
        """The messages ``author`` signed (``?author=``), after the first ``after`` of them, at most ``limit``."""
        return await self._send(self.operations.read(key, after or None, limit, author=author))

    async def participants(self, key: str) -> dict[str, int]:
        """Who took part: each author of the conversation's messages and how many it signed, most first."""
        return await self._send(self.operations.participants(key))

    async def fork(
        self,
        key: str,
        through: int | None = None,
        *,
        new_key: str | None = None,
        if_match: IfMatch = None,
        idempotency_key: str | None = None,
    ) -> str:
        """A new conversation holding the first ``through`` messages of ``key`` (all by default); its key.
        ``new_key`` names it (else the service does); ``if_match``: only if ``key`` is at that version;
        ``idempotency_key`` (default: new per call) makes the retries answer the same fork."""
        return await self._send(self.operations.fork(key, through, new_key, if_match, idempotency_key))

    async def head(self, key: str) -> Version:
        """The conversation's version without its messages: ``.count`` messages, ``.generation`` ``None`` if absent."""
        return await self._send(self.operations.head(key))

    async def append(
        self, key: str, messages: OutgoingMessages, *, if_match: IfMatch = None, idempotency_key: str | None = None
    ) -> Version | None:
        """Append ``messages`` in one request (all or nothing); the new version. ``if_match``: only at that version
        (else :class:`ChatHistoryServiceConflict`); ``idempotency_key`` (default: new per call) stores a repeat once."""
        return await self._send(self.operations.append(key, messages, if_match, idempotency_key))

    async def replace(self, key: str, messages: OutgoingMessages, *, if_match: IfMatch = None) -> Version | None:
        """Make ``messages`` the whole conversation; its new version."""
        return await self._send(self.operations.replace(key, messages, if_match))

    async def delete(self, key: str, *, if_match: IfMatch = None) -> None:
        """Forget the conversation (no error if it does not exist, unless ``if_match="*"``)."""
        await self._send(self.operations.delete(key, if_match))

    async def summaries(
        self, *, after: str | None = None, limit: int | None = None, tags: Mapping[str, str] | None = None
    ) -> list[ConversationSummary]:
        """One request: the conversations by key (all, or ``limit`` after ``after``); ``tags``: those carrying them."""
        return (await self.summaries_page(after=after, limit=limit, tags=tags)).summaries

    async def summaries_page(
        self, *, after: str | None = None, limit: int | None = None, tags: Mapping[str, str] | None = None
    ) -> SummariesPage:
        """:meth:`summaries`, with the key the next page starts after (``None``: this is the last page)."""
        return await self._send(self.operations.summaries(after, limit, tags))

    async def iter_summaries(
        self, *, page_size: int = 100, tags: Mapping[str, str] | None = None
    ) -> AsyncIterator[ConversationSummary]:
        """Every conversation (with ``tags``), ``page_size`` per request: a long list is never held whole."""
        after: str | None = None
        while True:
            page = await self.summaries_page(after=after, limit=page_size, tags=tags)
            for summary in page.summaries:
                yield summary
            if page.next_after is None:
                return
            after = page.next_after

    async def patch(self, key: str, change: Mapping[str, Any]) -> ConversationSummary:
        """Set the title and tags with a JSON merge patch (``{"title": ..., "tags": {...}}``); the new summary."""
        return await self._send(self.operations.patch(key, change))

    async def aclose(self) -> None:
        """Close the HTTP client if it was created here (never a caller's)."""
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> AsyncChatHistoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, request: Request[T]) -> T:
        headers = self._headers_for(request)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self.http.request(
                    request.method, request.url, headers=headers, content=request.content
                )
            except httpx.HTTPError as exc:
                if (wait := self.retry.wait_after_error(attempt, exc, request.what)) is None:
                    raise request.unanswered(exc) from exc
            else:
                if (wait := self.retry.wait_after_answer(attempt, response, request.what)) is None:
                    note_bytes(len(request.content or b"") + len(response.content))
                    return request.answer(response)
                await response.aclose()
            await self.retry.sleep(wait)


class ChatHistoryClient(_Client[httpx.Client]):
    """The chat history service, from blocking code (a script, a test; not an event loop): the arguments and methods
    of :class:`AsyncChatHistoryClient` (an ``httpx.Client`` as ``http_client``)."""

    _http_class = httpx.Client

    def read(self, key: str) -> MessagesPage:
        """Every message of conversation ``key`` (``[]`` if it does not exist) and its version."""
        return self._send(self.operations.read(key))

    def read_after(self, key: str, after: int, limit: int | None = None) -> MessagesPage:
        """The messages after the first ``after`` (at most ``limit``); ``next_after`` says where more start."""
        return self._send(self.operations.read(key, after, limit))

    def read_body(self, key: str) -> MessagesBody:
        """The whole conversation as the JSON array the service sent, unparsed, with its version."""
        return self._send(self.operations.read_body(key))

    def read_summary(self, key: str) -> MessagesPage:
        """The latest summary checkpoint and what follows it; ``version``, ``count``: the whole conversation's."""
        return self._send(self.operations.read(key, view="summary"))

    def read_by_author(self, key: str, author: str, after: int = 0, limit: int | None = None) -> MessagesPage:
        """As :meth:`AsyncChatHistoryClient.read_by_author`: the messages ``author`` signed, paged."""
        return self._send(self.operations.read(key, after or None, limit, author=author))

    def participants(self, key: str) -> dict[str, int]:
        """As :meth:`AsyncChatHistoryClient.participants`: each author and how many messages it signed."""
        return self._send(self.operations.participants(key))

    def fork(
        self,
        key: str,
        through: int | None = None,
        *,
        new_key: str | None = None,
        if_match: IfMatch = None,
        idempotency_key: str | None = None,
    ) -> str:
        """As :meth:`AsyncChatHistoryClient.fork`: the new conversation's key (one ``Idempotency-Key`` per call)."""
        return self._send(self.operations.fork(key, through, new_key, if_match, idempotency_key))

    def head(self, key: str) -> Version:
        """The conversation's version without its messages: ``.count`` messages, ``.generation`` ``None`` if absent."""
        return self._send(self.operations.head(key))

    def append(
        self, key: str, messages: OutgoingMessages, *, if_match: IfMatch = None, idempotency_key: str | None = None
    ) -> Version | None:
        """Append ``messages`` in one request (all or nothing); the new version. ``if_match``: only at that version
        (else :class:`ChatHistoryServiceConflict`); ``idempotency_key`` (default: new per call) stores a repeat once."""
        return self._send(self.operations.append(key, messages, if_match, idempotency_key))

    def replace(self, key: str, messages: OutgoingMessages, *, if_match: IfMatch = None) -> Version | None:
        """Make ``messages`` the whole conversation; its new version."""
        return self._send(self.operations.replace(key, messages, if_match))

    def delete(self, key: str, *, if_match: IfMatch = None) -> None:
        """Forget the conversation (no error if it does not exist, unless ``if_match="*"``)."""
        self._send(self.operations.delete(key, if_match))

    def summaries(
        self, *, after: str | None = None, limit: int | None = None, tags: Mapping[str, str] | None = None
    ) -> list[ConversationSummary]:
        """One request: the conversations by key (all, or ``limit`` after ``after``); ``tags``: those carrying them."""
        return self.summaries_page(after=after, limit=limit, tags=tags).summaries

    def summaries_page(
        self, *, after: str | None = None, limit: int | None = None, tags: Mapping[str, str] | None = None
    ) -> SummariesPage:
        """:meth:`summaries`, with the key the next page starts after (``None``: this is the last page)."""
        return self._send(self.operations.summaries(after, limit, tags))

    def iter_summaries(
        self, *, page_size: int = 100, tags: Mapping[str, str] | None = None
    ) -> Iterator[ConversationSummary]:
        """Every conversation (with ``tags``), ``page_size`` per request: a long list is never held whole."""
        after: str | None = None
        while True:
            page = self.summaries_page(after=after, limit=page_size, tags=tags)
            yield from page.summaries
            if page.next_after is None:
                return
            after = page.next_after

    def patch(self, key: str, change: Mapping[str, Any]) -> ConversationSummary:
        """Set the title and tags with a JSON merge patch (``{"title": ..., "tags": {...}}``); the new summary."""
        return self._send(self.operations.patch(key, change))

    def close(self) -> None:
        """Close the HTTP client if it was created here (never a caller's)."""
        if self._owns_http:
            self.http.close()

    def __enter__(self) -> ChatHistoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, request: Request[T]) -> T:
        headers = self._headers_for(request)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.http.request(request.method, request.url, headers=headers, content=request.content)
            except httpx.HTTPError as exc:
                if (wait := self.retry.wait_after_error(attempt, exc, request.what)) is None:
                    raise request.unanswered(exc) from exc
            else:
                if (wait := self.retry.wait_after_answer(attempt, response, request.what)) is None:
                    note_bytes(len(request.content or b"") + len(response.content))
                    return request.answer(response)
                response.close()
            self.retry.sleep_sync(wait)
