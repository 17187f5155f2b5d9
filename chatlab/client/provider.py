"""``RemoteChatHistoryProvider``: the agent's history lives in the chat history service, not in the session.

The session keeps only ``{"externalConversationKey": "<32 hex digits>"}``. After each run the provider appends its
request and response messages in **one** ``POST`` (a failure appends nothing). Methods name their article C# member.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import partial
from typing import Any, Literal, TextIO

import httpx
from agent_framework import AgentSession, HistoryProvider, Message

from ..vocabulary import DEFAULT_SERVICE_URL, ConversationSummary, Version
from .cache import HistoryCache
from .claims import claim_inputs
from .codec import messages_from_meai
from .compaction import Compaction
from .errors import (
    ChatHistoryServiceProtocolError,
    ChatHistoryServiceStatusError,
    ChatlabError,
    DivergentHistoryError,
)
from .http import AsyncChatHistoryClient, Verify, service_url
from .keys import new_conversation_key
from .resend import align
from .retry import RetryPolicy
from .runs import RunRecord, current_run, run_of, running, start_run
from .tracing import MESSAGES, history_span, mark_conversation, note_read
from .views import View, agent_name, name_the_author, show_view, whole_transcript
from .window import estimate_tokens, window_messages

__all__ = [
    "DEFAULT_SERVICE_URL",
    "ChatHistorySummary",
    "RemoteChatHistoryProvider",
    "new_conversation_key",
    "service_url",
    "show_provider_calls",
]

STATE_KEY = "RemoteChatHistoryProvider"
KEY_FIELD = "externalConversationKey"
_NO_HEAD = frozenset({400, 404, 405, 501})  # an older service (no HEAD), or a key it refuses: ask otherwise

ChatHistorySummary = ConversationSummary
"""The article's ``ChatHistorySummary``: :class:`chatlab.vocabulary.ConversationSummary`."""

log = logging.getLogger(__name__)  # the provider's calls, as the article's Console.WriteLine lines


class _StdoutHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stdout`` is at each line: a notebook cell's, pytest's."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def show_provider_calls(enabled: bool = True) -> None:
    """Print the provider's calls to stdout as the article does (``[ProvideChatHistoryAsync]``, ...)."""
    for handler in [h for h in log.handlers if isinstance(h, _StdoutHandler)]:
        log.removeHandler(handler)
    log.setLevel(logging.INFO if enabled else logging.NOTSET)
    if enabled:
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)


def _describe(message: Message | None) -> str:
    """``role , [content types]`` like the article's ``First Message: user , ...`` line."""
    return " ," if message is None else f"{message.role} , [{', '.join(c.type for c in message.contents)}]"


class RemoteChatHistoryProvider(HistoryProvider):
    """A ``HistoryProvider`` that keeps the history in the chat history service, keyed per session.

    Args:
        url, http_client, api_key, verify, timeout, retry: of the :class:`AsyncChatHistoryClient` it creates.
        client: a caller-owned client to use instead (not closed here).
        state_initializer, state_key: make a session's key (default: a new 32-hex key), and name where it lives in
            ``session.state`` (default ``"RemoteChatHistoryProvider"``).
        incremental, cache_size: fetch only the messages newer than those cached, for up to ``cache_size``
            conversations (default); ``incremental=False`` reads all before every run, as the article does.
        max_history_messages, max_history_tokens: hand the model at most this many of the newest messages, or tokens
            as ``count_tokens`` counts them (``None``: all), never a call without its result (:mod:`.window`).
        skip_replayed: read a run's input against the stored history, so that a resent transcript is stored once
            (docs/conversations.md, "Resent transcripts"); ``False`` stores the input as given, as the article does.
        on_divergence: what a resend that differs from the history at stored message ``k`` does: ``"fork"``
            (default) continues the session on a fork through message ``k - 1``, the original kept intact;
            ``"raise"`` raises :class:`~chatlab.client.errors.DivergentHistoryError` naming ``k``.
        compaction: opt in to summary checkpoints (:class:`~chatlab.client.compaction.Compaction`).
        view: what of a conversation shared by several agents this agent's model is handed (:mod:`.views`).
        history_options: ``HistoryProvider`` flags (``load_messages``, ``store_inputs``, ``store_outputs``, ...).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: AsyncChatHistoryClient | None = None,
        http_client: httpx.AsyncClient | None = None,
        state_initializer: Callable[[AgentSession | None], str] | None = None,
        state_key: str | None = None,
        timeout: float = 60.0,
        api_key: str | None = None,
        verify: Verify | None = None,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 - immutable
        incremental: bool = True,
        cache_size: int = 32,
        max_history_messages: int | None = None,
        max_history_tokens: int | None = None,
        count_tokens: Callable[[Message], int] = estimate_tokens,
        skip_replayed: bool = True,
        on_divergence: Literal["fork", "raise"] = "fork",
        compaction: Compaction | None = None,
        view: View = whole_transcript,
        **history_options: Any,
    ) -> None:
        super().__init__(state_key or STATE_KEY, **history_options)
        if client is not None and (url, http_client, api_key, verify) != (None, None, None, None):
            raise ValueError("with client=, set url, http_client, api_key and verify on that client instead")
        for name, limit in (("max_history_messages", max_history_messages), ("max_history_tokens", max_history_tokens)):
            if limit is not None and (not isinstance(limit, int) or limit < 1):
                raise ValueError(f"{name} must be a whole number of at least 1, or None for no limit")
        if on_divergence not in ("fork", "raise"):
            raise ValueError(f"on_divergence must be 'fork' or 'raise', not {on_divergence!r}")
        self.window = partial(
            window_messages, max_messages=max_history_messages, max_tokens=max_history_tokens, count_tokens=count_tokens
        )
        self._owns_client = client is None
        self.client = client or AsyncChatHistoryClient(
            url, http_client=http_client, api_key=api_key, verify=verify, timeout=timeout, retry=retry
        )
        self._initializer = state_initializer or new_conversation_key
        self.incremental = incremental
        self._cache = HistoryCache(self.client, cache_size if incremental else 0)
        self.skip_replayed = skip_replayed
        self.on_divergence = on_divergence
        self.compaction = compaction
        self.view = view

    @property
    def url(self) -> str:
        """The service's URL."""
        return self.client.url

    @property
    def state_keys(self) -> list[str]:
        """The keys this provider uses in ``session.state`` (C# ``StateKeys``)."""
        return [self.source_id]

    def try_get_external_conversation_key(self, session: AgentSession) -> str | None:
        """The session's conversation key, or ``None`` if it has none yet (C# ``TryGetExternalConversationKey``)."""
        state = session.state.get(self.source_id)
        key = state.get(KEY_FIELD) if isinstance(state, dict) else None
        return key if isinstance(key, str) and key else None

    def conversation_key(self, session: AgentSession) -> str:
        """The session's conversation key, created (as the first run would) if missing (C# ``GetOrInitializeState``)."""
        return self._key_in(session.state.setdefault(self.source_id, {}), session)

    def attach_to_session(self, session: AgentSession, key: str) -> None:
        """Make ``session`` continue the conversation ``key``, its state's only entry (C# ``AttachToSession``)."""
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

    async def before_run(self, *, agent: Any, session: AgentSession, context: Any, state: dict[str, Any]) -> None:
        """Load the conversation before a run (C# ``ProvideChatHistoryAsync``), and read a resent transcript."""
        log.info("[ProvideChatHistoryAsync]")
        key = self._key_in(state, session)
        log.info("Found messages for ExternalConversationKey: %s", key)
        mark_conversation(key)
        record = start_run(context.metadata, self.source_id)
        with history_span("chatlab.history.load", key) as span, running(record):
            await super().before_run(agent=agent, session=session, context=context, state=state)
            if self.skip_replayed:
                await self._read_resend(key, context, state, record)
            show_view(context, self.source_id, self.view, agent_name(agent))
            span.set_attribute(MESSAGES, len(context.context_messages.get(self.source_id, [])))

    async def _read_resend(self, key: str, context: Any, state: dict[str, Any], record: RunRecord) -> None:
        """Give the model, and later the save, each message once: the input's replayed part is dropped from it, and
        a divergent one continues on a branch (:mod:`.resend`)."""
        loaded = context.context_messages.get(self.source_id, [])
        alignment = align(loaded, context.input_messages)
        if alignment.diverges_at is not None:
            through = record.loaded_through - len(loaded) + alignment.diverges_at
            await self._branch(key, state, through)
            context.context_messages[self.source_id] = list(loaded[: alignment.diverges_at])
        if alignment.replayed:
            log.info("Replayed: the input's first %d messages are already stored", alignment.replayed)
            context.input_messages = list(context.input_messages[alignment.replayed :])

    async def _branch(self, key: str, state: dict[str, Any], through: int) -> None:
        """Move the session to a fork of ``key`` through message ``through`` (or refuse: ``on_divergence="raise"``).

        A branch at the first message shares nothing with ``key`` (a fork holds at least one message): it is a new
        conversation. With compaction the loaded view does not map to positions, so a divergence is refused."""
        if self.on_divergence == "raise" or self.compaction is not None:
            raise DivergentHistoryError(key, through + 1)
        fork = await self.client.fork(key, through) if through else new_conversation_key()
        state.clear()
        state[KEY_FIELD] = fork
        log.info("Diverged at message %d: continuing on fork %s of %s", through + 1, fork, key)

    async def after_run(self, *, agent: Any, session: AgentSession, context: Any, state: dict[str, Any]) -> None:
        """Append the run's request and response messages (C# ``StoreChatHistoryAsync``)."""
        log.info("[StoreChatHistoryAsync]")
        log.info("Storing messages for ExternalConversationKey: %s", self._key_in(state, session))
        if context.response is not None:
            response = context.response.messages
            log.info("ResponseMessages Count: %d", len(response))
            log.info("First ResponseMessage: %s", _describe(response[0] if response else None))
            name_the_author(response, agent_name(agent))
        record = run_of(context.metadata, self.source_id)
        claims = claim_inputs(context, f"{self.url} {self._key_in(state, session)}")
        with history_span("chatlab.history.save", self._key_in(state, session)) as span, running(record):
            with claims if self.store_inputs else nullcontext():
                await super().after_run(agent=agent, session=session, context=context, state=state)
            span.set_attribute(MESSAGES, len(record.appended))
        if self.compaction is not None:
            await self._compact(agent, self._key_in(state, session), self.compaction, record)

    async def _compact(self, agent: Any, key: str, compaction: Compaction, record: RunRecord) -> None:
        """Past the thresholds, append a summary of the view (as loaded plus appended, unless written meanwhile)."""
        version = record.version
        loaded = record.loaded
        if loaded is not None and version is not None and version.count == record.loaded_through + len(record.appended):
            view = [*loaded, *record.appended]
            through = version.count
        else:
            page = await self.client.read_summary(key)
            view = messages_from_meai(page.messages)
            through = page.count
        if not compaction.due(view):
            return
        checkpoint = await compaction.summarize(agent.client, view, through=through)
        await self.append_messages(key, [checkpoint])
        log.info("[Compaction] summary checkpoint of messages 1..%d (%d in the view)", through, len(view))

    async def get_messages(  # type: ignore[override]  # a view of the cache, not a copy; the framework only reads it
        self, session_id: AgentSession | str | None = None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> Sequence[Message]:
        """A session's stored messages (C# ``GetMessagesAsync``): given an ``AgentSession``, a new list (``[]``
        without a key); given ``state`` (the framework, in a run), the model's window onto the cached history."""
        if isinstance(session_id, AgentSession):
            key = self.try_get_external_conversation_key(session_id)
        else:
            key = state.get(KEY_FIELD) if isinstance(state, dict) else None
        if not key:
            return []
        if state is None:  # the article's GetMessagesAsync: a fresh, complete read the caller may keep
            return messages_from_meai((await self.client.read(key)).messages)
        messages: Sequence[Message]
        if self.compaction is not None:
            note_read("summary")
            page = await self.client.read_summary(key)
            messages = messages_from_meai(page.messages)
            count = page.count
        else:
            messages = await self._cache.load(key)
            count = len(messages)
        record = current_run()
        if record is not None:
            record.loaded = messages
            record.loaded_through = count
        windowed = self.window(messages)
        log.info("Messages Count: %d", len(windowed))
        if len(windowed) != len(messages):
            log.info("History window: the newest %d of %d stored messages", len(windowed), len(messages))
        log.info("First Message: %s", _describe(windowed[0] if windowed else None))
        return windowed

    async def save_messages(
        self, session_id: str | None, messages: Sequence[Message], *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """Append ``messages`` to the conversation in ``state`` in one request (all or nothing)."""
        key = state.get(KEY_FIELD) if isinstance(state, dict) else None
        if not key:
            raise ValueError("save_messages needs the session's provider state holding the conversation key")
        if not messages:
            return
        version = await self._cache.append(key, messages)
        record = current_run()
        if record is not None:
            record.appended = list(messages)
            record.version = version

    async def set_messages(self, session: AgentSession, messages: Sequence[Message]) -> None:
        """Replace a session's stored messages (C# ``SetMessagesAsync``); no key, nothing to do."""
        if key := self.try_get_external_conversation_key(session):
            await self._cache.replace(key, messages)

    async def append_messages(self, key: str, messages: Sequence[Message]) -> None:
        """Append messages to conversation ``key`` in one ``POST`` (its ``Idempotency-Key`` makes retries safe)."""
        if messages:
            await self._cache.append(key, messages)

    async def fork_session(self, session: AgentSession, *, through: int | None = None) -> AgentSession:
        """A new session continuing a copy of ``session``'s conversation (its first ``through`` messages, or all)."""
        if (key := self.try_get_external_conversation_key(session)) is None:
            raise ValueError("the session has no conversation yet: run it once before forking it")
        forked = AgentSession()
        self.attach_to_session(forked, await self.client.fork(key, through))
        return forked

    async def get_stored_message_count(self, key: str) -> int:
        """How many messages conversation ``key`` holds (C# ``GetStoredMessageCountAsync``), by ``HEAD``."""
        version = await self._head(key)
        return version.count if version else (await self.client.read(key)).count

    async def get_conversation_summaries(self) -> list[ChatHistorySummary]:
        """Every conversation with its message count, ordered by key (C# ``GetConversationSummariesAsync``)."""
        return await self.client.summaries()

    async def session_exists(self, key: str) -> bool:
        """Whether the service holds a conversation ``key`` (C# ``SessionExistsAsync``)."""
        if not isinstance(key, str) or not key.strip():
            raise ValueError("a conversation key must be a non-empty string")
        if version := await self._head(key):
            return version.generation is not None
        return any(s.conversation_key == key for s in await self.get_conversation_summaries())

    async def _head(self, key: str) -> Version | None:
        """The conversation's version from ``HEAD``; ``None`` from a service without it (the article's)."""
        try:
            return await self.client.head(key)
        except (ChatHistoryServiceStatusError, ChatHistoryServiceProtocolError) as exc:
            if exc.status is None or exc.status in _NO_HEAD:
                return None
            raise

    async def aclose(self) -> None:
        """Close the client if this provider created it, never a caller's (C# ``Dispose``)."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> RemoteChatHistoryProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<RemoteChatHistoryProvider {self.url} state_key={self.source_id!r}>"
