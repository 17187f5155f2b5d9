"""``RemoteChatHistoryProvider``: the agent's history lives in the chat history service, not in the session.

The session keeps one thing, under the state key ``RemoteChatHistoryProvider``:
``{"externalConversationKey": "<32 hex digits>"}``. Before each run the provider reads
that conversation (``GET /chat-history/{key}``); after the run it appends the run's
request and response messages in **one** ``POST`` (so a failure appends nothing).
``session.to_dict()`` stays plain JSON, and any process that knows the key can resume.

The article's C# members and their Python names:

=================================  ==============================================  ==============================
C# (``RemoteChatHistoryProvider``)  Python                                          what it does
=================================  ==============================================  ==============================
``ProvideChatHistoryAsync``        ``before_run`` -> ``get_messages``              load the history before a run
``StoreChatHistoryAsync``          ``after_run`` -> ``save_messages``              append request + response after
``StateKeys``                      ``state_keys``                                  the state keys it uses
``TryGetExternalConversationKey``  ``try_get_external_conversation_key(session)``  the session's key, or ``None``
(``GetOrInitializeState``)         ``conversation_key(session)``                   the key, created if missing
``GetStoredMessageCountAsync``     ``get_stored_message_count(key)``               how many messages a key holds
``GetMessagesAsync``               ``get_messages(session)``                       a session's stored messages
``SetMessagesAsync``               ``set_messages(session, messages)``             replace them (``PUT``)
``GetConversationSummariesAsync``  ``get_conversation_summaries()``                every key with its count
``SessionExistsAsync``             ``session_exists(key)``                         is the key on the service?
``AttachToSession``                ``attach_to_session(session, key)``             point a session at a key
``Dispose``                        ``aclose()`` / ``async with``                   close the HTTP client it owns
=================================  ==============================================  ==============================

Call :func:`show_provider_calls` to print what happens when, like the article's
``Console.WriteLine`` lines (``[ProvideChatHistoryAsync]``, ``Messages Count: N``, ...).

Against a protected service (docs/protections.md) the provider sends its API key
(``api_key=`` or ``CHAT_HISTORY_SERVICE_API_KEY``), verifies the service's TLS certificate
(``verify=`` a CA bundle for a private CA), and retries transient failures (no answer, 429
after its ``Retry-After``, 502-504) with backoff (``retry=``); each append carries an
``Idempotency-Key`` kept across its retries, so a retried append is stored once.

Unlike the article, a turn does not download the whole conversation again: the provider
keeps what it loaded per conversation and asks only for what is new
(``GET /chat-history/{key}?after=N``), checking with the conversation's version that what it
holds is still the start of the conversation (:mod:`chatlab.client.cache`); when it is not
(replaced or deleted by another client) it loads everything. ``max_history_messages`` /
``max_history_tokens`` hand the model only the end of a long conversation, never half a tool
call (:mod:`chatlab.client.window`); the service keeps everything.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from agent_framework import AgentSession, HistoryProvider, Message

from .cache import CachedHistory, HistoryCache, parse_version
from .codec import messages_from_meai, messages_to_meai
from .errors import (
    ChatHistoryServiceError,
    ChatHistoryServiceStatusError,
    ChatHistoryServiceUnavailable,
    ChatlabError,
)
from .retry import NO_RETRIES, RetryPolicy
from .window import estimate_tokens, window_messages

__all__ = [
    "DEFAULT_SERVICE_URL",
    "ChatHistorySummary",
    "RemoteChatHistoryProvider",
    "service_url",
    "show_provider_calls",
]

log = logging.getLogger(__name__)

DEFAULT_SERVICE_URL = "http://localhost:5000"
API_KEY_VARIABLE = "CHAT_HISTORY_SERVICE_API_KEY"
STATE_KEY = "RemoteChatHistoryProvider"
KEY_FIELD = "externalConversationKey"

StateInitializer = Callable[[AgentSession | None], str]


@dataclass(frozen=True)
class ChatHistorySummary:
    """The article's ``ChatHistorySummary``: a conversation key and its message count."""

    conversation_key: str
    message_count: int


def service_url(url: str | None = None) -> str:
    """The service URL: the argument, else ``CHAT_HISTORY_SERVICE_URL``, else ``http://localhost:5000``."""
    return (url or os.environ.get("CHAT_HISTORY_SERVICE_URL") or DEFAULT_SERVICE_URL).rstrip("/")


_last_key = 0
_key_lock = threading.Lock()


def new_conversation_key(_session: AgentSession | None = None) -> str:
    """A fresh key: a GUID in .NET's "N" format (32 hex digits), as in the article.

    It is a time-ordered UUID version 7 (RFC 9562), strictly increasing within a process, so the
    service, which lists conversations by key, lists them in the order they began, and database
    stores insert new keys at the end of their index.
    """
    global _last_key
    with _key_lock:
        value = max(((time.time_ns() // 1_000_000) << 74) | secrets.randbits(74), _last_key + 1)
        _last_key = value
    millis, rand_a, rand_b = value >> 74, (value >> 62) & 0xFFF, value & ((1 << 62) - 1)
    return f"{(millis << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b:032x}"


class RemoteChatHistoryProvider(HistoryProvider):
    """A ``HistoryProvider`` that keeps the history in the chat history service, keyed per session.

    Args:
        url: the service; default ``CHAT_HISTORY_SERVICE_URL``, else ``http://localhost:5000``.
        http_client: a caller-owned ``httpx.AsyncClient`` to send requests with (not closed here).
        state_initializer: makes the key of a session that has none (default: a new 32-hex key).
        state_key: where the key lives in ``session.state`` (default ``"RemoteChatHistoryProvider"``).
        timeout: seconds per request when the provider creates its own client (the article: 1 minute).
        api_key: the service's API key, sent as ``Authorization: Bearer <key>``; default
            ``CHAT_HISTORY_SERVICE_API_KEY``, else none (the article's open service).
        verify: how the client the provider creates checks the service's TLS certificate: ``True``
            (httpx's default CAs, certifi's, or ``SSL_CERT_FILE``), a CA bundle path, an
            ``ssl.SSLContext``, or ``False`` (no check: only for experiments). A caller-owned client
            keeps its own setting.
        retry: how transient failures (no answer, 429, 502-504) are retried; ``None`` never retries.
            Each append carries an ``Idempotency-Key`` kept across its retries, so it is stored once.
        incremental: keep what was loaded per conversation and fetch only newer messages (default);
            ``False`` reads the whole conversation before every run, as the article does.
        cache_size: how many conversations the incremental cache keeps (least recently used go first).
        max_history_messages: hand the model at most this many of the newest messages (``None``: all).
        max_history_tokens: hand the model at most this many tokens of the newest messages, as
            ``count_tokens`` counts them (default: a rough estimate, 4 characters a token).
            Neither limit ever separates a tool call from its result; the service keeps everything.
        history_options: ``HistoryProvider`` flags (``load_messages``, ``store_inputs``, ``store_outputs``, ...).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        state_initializer: StateInitializer | None = None,
        state_key: str | None = None,
        timeout: float = 60.0,
        api_key: str | None = None,
        verify: bool | str | os.PathLike[str] | ssl.SSLContext | None = None,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 - immutable
        incremental: bool = True,
        cache_size: int = 32,
        max_history_messages: int | None = None,
        max_history_tokens: int | None = None,
        count_tokens: Callable[[Message], int] = estimate_tokens,
        **history_options: Any,
    ) -> None:
        super().__init__(state_key or STATE_KEY, **history_options)
        if url is None and http_client is not None and str(http_client.base_url):
            url = str(http_client.base_url)
        if http_client is not None and verify is not None:
            raise ValueError("verify applies to the client the provider creates: set it on your http_client instead")
        self.url = service_url(url)
        self._owns_client = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout, verify=_ssl_verify(verify))
        self._initializer = state_initializer or new_conversation_key
        key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE) or None
        self._auth_headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.retry = retry or NO_RETRIES
        for name, limit in (("max_history_messages", max_history_messages), ("max_history_tokens", max_history_tokens)):
            if limit is not None and (not isinstance(limit, int) or limit < 1):
                raise ValueError(f"{name} must be a whole number of at least 1, or None for no limit")
        self.incremental = incremental
        self.max_history_messages = max_history_messages
        self.max_history_tokens = max_history_tokens
        self.count_tokens = count_tokens
        self._cache = HistoryCache(cache_size if incremental else 0)

    # ------------------------------------------------------------------ session <-> key

    @property
    def state_keys(self) -> list[str]:
        """The keys this provider uses in ``session.state`` (C# ``StateKeys``)."""
        return [self.source_id]

    def try_get_external_conversation_key(self, session: AgentSession) -> str | None:
        """The session's conversation key, or ``None`` if it has none yet."""
        state = session.state.get(self.source_id)
        key = state.get(KEY_FIELD) if isinstance(state, dict) else None
        return key if isinstance(key, str) and key else None

    def conversation_key(self, session: AgentSession) -> str:
        """The session's conversation key, creating it (as the first run would) if missing."""
        return self._key_in(session.state.setdefault(self.source_id, {}), session)

    def attach_to_session(self, session: AgentSession, key: str) -> None:
        """Make ``session`` continue the conversation ``key`` (its state then holds only that key)."""
        if not isinstance(key, str) or not key.strip():
            raise ValueError("a conversation key must be a non-empty string")
        session.state[self.source_id] = {KEY_FIELD: key}

    def _key_in(self, state: dict[str, Any], session: AgentSession | None) -> str:
        key = state.get(KEY_FIELD)
        if not isinstance(key, str) or not key:
            key = self._initializer(session)
            if not isinstance(key, str) or not key.strip():
                raise ChatlabError(f"the state initializer returned {key!r}; it must return a non-empty key")
            state.clear()
            state[KEY_FIELD] = key
        return key

    # ------------------------------------------------------------------ the run hooks

    async def before_run(self, *, agent: Any, session: AgentSession, context: Any, state: dict[str, Any]) -> None:
        """Load the conversation before a run (C# ``ProvideChatHistoryAsync``)."""
        log.info("[ProvideChatHistoryAsync]")
        key = self._key_in(state, session)
        log.info("Found messages for ExternalConversationKey: %s", key)
        await super().before_run(agent=agent, session=session, context=context, state=state)

    async def after_run(self, *, agent: Any, session: AgentSession, context: Any, state: dict[str, Any]) -> None:
        """Append the run's request and response messages (C# ``StoreChatHistoryAsync``)."""
        log.info("[StoreChatHistoryAsync]")
        key = self._key_in(state, session)
        log.info("Storing messages for ExternalConversationKey: %s", key)
        response = context.response.messages if context.response is not None else None
        if response is not None:
            log.info("ResponseMessages Count: %d", len(response))
            log.info("First ResponseMessage: %s", _describe(response[0] if response else None))
        await super().after_run(agent=agent, session=session, context=context, state=state)

    async def get_messages(
        self, session_id: AgentSession | str | None = None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        """A session's stored messages (C# ``GetMessagesAsync``); the framework calls it with ``state``.

        Pass an ``AgentSession`` to read that session's conversation; ``[]`` when it has no key yet.
        """
        if isinstance(session_id, AgentSession):
            key = self.try_get_external_conversation_key(session_id)
        else:
            key = state.get(KEY_FIELD) if isinstance(state, dict) else None
        if not key:
            return []
        if state is None:  # the article's GetMessagesAsync: a fresh, complete read the caller may keep
            return await self._load(key)
        messages = await self._history(key)
        windowed = self._window(messages)
        log.info("Messages Count: %d", len(windowed))
        if len(windowed) != len(messages):
            log.info("History window: the newest %d of %d stored messages", len(windowed), len(messages))
        log.info("First Message: %s", _describe(windowed[0] if windowed else None))
        return windowed

    def _window(self, messages: list[Message]) -> list[Message]:
        if self.max_history_messages is None and self.max_history_tokens is None:
            return messages
        return window_messages(
            messages,
            max_messages=self.max_history_messages,
            max_tokens=self.max_history_tokens,
            count_tokens=self.count_tokens,
        )

    async def _history(self, key: str) -> list[Message]:
        """The whole conversation: from the cache plus what is new, or one full read."""
        entry = self._cache.get(key) if self.incremental else None
        if entry is not None:
            url = f"{self._conversation_url(key)}?after={entry.count}"
            response = await self._request("GET", url)
            version = parse_version(response.headers.get("etag"))
            delta = self._json_list(response, url)
            if version is not None and version.continues(entry.generation, entry.count, len(delta)):
                added = messages_from_meai(delta)
                if self._cache.get(key) is entry:  # nothing else updated it meanwhile
                    entry = entry.extended(version, added)
                    self._cache.put(key, entry)
                    return entry.view()
                return entry.view() + added
            log.debug("conversation %s changed beyond appends (version %s): loading all of it", key, version)
        url = self._conversation_url(key)
        response = await self._request("GET", url)
        messages = messages_from_meai(self._json_list(response, url))
        version = parse_version(response.headers.get("etag"))
        if self.incremental and version is not None and version.count == len(messages):
            self._cache.put(key, CachedHistory(version.generation, version.count, list(messages)))
        else:
            self._cache.discard(key)
        return messages

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append ``messages`` to the conversation in ``state`` in one request (all or nothing)."""
        key = state.get(KEY_FIELD) if isinstance(state, dict) else None
        if not key:
            raise ValueError("save_messages needs the session's provider state holding the conversation key")
        await self.append_messages(key, messages)

    # ------------------------------------------------------------------ the article's extras

    async def set_messages(self, session: AgentSession, messages: Sequence[Message]) -> None:
        """Replace a session's stored messages (C# ``SetMessagesAsync``); no key, nothing to do."""
        key = self.try_get_external_conversation_key(session)
        if key:
            body = {"messages": messages_to_meai(messages)}
            self._cache.discard(key)
            try:
                await self._request("PUT", self._conversation_url(key), json=body)
            finally:
                self._cache.discard(key)

    async def append_messages(self, key: str, messages: Sequence[Message]) -> None:
        """Append messages to conversation ``key`` in one ``POST``; an empty list sends nothing.

        The ``POST`` carries a fresh ``Idempotency-Key``, the same on each retry, so a retry
        whose first attempt was stored but not answered stores nothing twice.
        """
        if messages:
            body = {"messages": messages_to_meai(messages)}  # encode first: a bad message sends nothing
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            entry = self._cache.get(key)
            headers = {"Idempotency-Key": f'"{uuid.uuid4()}"', "Content-Type": "application/json"}
            response = await self._request("POST", self._conversation_url(key), content=content, headers=headers)
            self._remember_append(key, entry, response, content, len(messages))

    def _remember_append(
        self, key: str, entry: CachedHistory | None, response: httpx.Response, content: bytes, added: int
    ) -> None:
        """Add an append to the cache when its version proves it came right after what the cache holds."""
        if entry is None or self._cache.get(key) is not entry:
            return
        version = parse_version(response.headers.get("etag"))
        if version is None or not version.continues(entry.generation, entry.count, added):
            return  # someone else wrote in between (or an old service): the next read fetches it all
        sent = messages_from_meai(json.loads(content)["messages"])  # exactly what a reader will decode
        self._cache.put(key, entry.extended(version, sent))

    async def get_stored_message_count(self, key: str) -> int:
        """How many messages conversation ``key`` holds (C# ``GetStoredMessageCountAsync``).

        One ``HEAD`` request that reads no message (a service without it: a full ``GET``).
        """
        head = await self._head(key)
        if head is not None:
            return head[0]
        return len(await self._get_json_list(self._conversation_url(key)))

    async def _head(self, key: str) -> tuple[int, bool] | None:
        """The count and existence of a conversation from ``HEAD``, or ``None`` if the service cannot say."""
        url = self._conversation_url(key)
        try:
            response = await self._request("HEAD", url)
        except ChatHistoryServiceStatusError as exc:
            if exc.status in (400, 404, 405, 501):  # an older service (no HEAD), or a key it refuses: ask otherwise
                return None
            raise
        count = response.headers.get("x-message-count", "")
        version = parse_version(response.headers.get("etag"))
        if not count.isdigit() or version is None:
            return None
        return int(count), version.generation is not None

    async def get_conversation_summaries(self) -> list[ChatHistorySummary]:
        """Every conversation on the service with its message count, ordered by key."""
        items = await self._get_json_list(f"{self.url}/chat-history")
        try:
            return [ChatHistorySummary(str(i["conversationKey"]), int(i["messageCount"])) for i in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise self._not_a_service(f"{self.url}/chat-history", f"unexpected summary: {exc}") from exc

    async def session_exists(self, key: str) -> bool:
        """Whether the service holds a conversation ``key`` (C# ``SessionExistsAsync``)."""
        if not isinstance(key, str) or not key.strip():
            raise ValueError("a conversation key must be a non-empty string")
        head = await self._head(key)
        if head is not None:
            return head[1]
        return any(s.conversation_key == key for s in await self.get_conversation_summaries())

    # ------------------------------------------------------------------ HTTP

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it (never a caller's)."""
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self) -> RemoteChatHistoryProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<RemoteChatHistoryProvider {self.url} state_key={self.source_id!r}>"

    def _conversation_url(self, key: str) -> str:
        return f"{self.url}/chat-history/{quote(key, safe='')}"

    async def _load(self, key: str) -> list[Message]:
        return messages_from_meai(await self._get_json_list(self._conversation_url(key)))

    async def _get_json_list(self, url: str) -> list[Any]:
        return self._json_list(await self._request("GET", url), url)

    def _json_list(self, response: httpx.Response, url: str) -> list[Any]:
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, list):
            raise self._not_a_service(url, "the answer is not a JSON array")
        return data

    async def _request(
        self, method: str, url: str, *, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One request, retried by the policy when it fails transiently (every request here is safe to repeat)."""
        all_headers = {**self._auth_headers, **(headers or {})}
        try:
            response = await self.retry.send(
                lambda: self._http.request(method, url, headers=all_headers, **kwargs), f"{method} {url}"
            )
        except httpx.TimeoutException as exc:
            raise ChatHistoryServiceUnavailable.for_request(method, url, f"timed out: {type(exc).__name__}") from exc
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise ChatHistoryServiceUnavailable.for_request(method, url, reason) from exc
        if response.status_code >= 400:
            raise ChatHistoryServiceStatusError.for_response(method, url, response.status_code, _detail(response))
        return response

    @staticmethod
    def _not_a_service(url: str, why: str) -> ChatHistoryServiceError:
        return ChatHistoryServiceError(
            f"{url} did not answer like a chat history service ({why}). "
            "Check CHAT_HISTORY_SERVICE_URL; start the service with `python -m chatlab serve --port 5000`.",
            url=url,
        )


def _ssl_verify(verify: bool | str | os.PathLike[str] | ssl.SSLContext | None) -> bool | ssl.SSLContext:
    """httpx's ``verify`` from the provider's: a CA bundle path becomes an SSL context."""
    if verify is None:
        return True
    if isinstance(verify, (str, os.PathLike)):
        return ssl.create_default_context(cafile=os.fspath(verify))
    return verify


def _detail(response: httpx.Response) -> str:
    """The service's own explanation of an error, short."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300].strip()
    if isinstance(body, dict):
        for key in ("detail", "error", "message", "title"):
            if key in body:
                value = body[key]
                return value if isinstance(value, str) else str(value)[:300]
    return str(body)[:300]


def _describe(message: Message | None) -> str:
    """``role , [content types]`` like the article's ``First Message: user , ...`` line."""
    if message is None:
        return " ,"
    return f"{message.role} , [{', '.join(c.type for c in message.contents)}]"


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic in typeshed, not at run time
    """Writes to whatever ``sys.stdout`` is at the time (a notebook cell's, pytest's)."""

    @property
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def show_provider_calls(enabled: bool = True) -> None:
    """Print the provider's calls to stdout as the article does (``[ProvideChatHistoryAsync]``, ...)."""
    for handler in [h for h in log.handlers if isinstance(h, _StdoutHandler)]:
        log.removeHandler(handler)
    if enabled:
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    else:
        log.setLevel(logging.NOTSET)
