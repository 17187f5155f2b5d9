"""Where conversations come from and go to (:data:`Place`): a store opened by URL, or a running service over HTTP.

Both write only over the version read (``if_match``; ``If-Match`` over HTTP), each write one store call or request.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from typing import Any, TypeAlias, TypeVar

from ..client.errors import (
    ChatHistoryServiceConflict,
    ChatHistoryServiceProtocolError,
    ChatHistoryServiceStatusError,
    ChatHistoryServiceUnavailable,
)
from ..client.http import AsyncChatHistoryClient
from ..service.keys import KeyRule
from ..service.security.auth import NAMESPACE_PATTERN, Caller
from ..service.settings import ServiceSettings
from ..stores import ChatHistoryStore, open_store
from ..stores.base import ABSENT, StoreError, VersionMismatch, summary_of
from ..stores.metadata import MAX_TAGS, MetadataChange
from ..vocabulary import NAMESPACE_SEPARATOR, ConversationSummary, Refused, Version, is_plain
from .lines import split_array

T = TypeVar("T")

#: Conversations listed a page at a time while walking a whole store or service.
PAGE = 1000


class PlaceError(RuntimeError):
    """The place refused this conversation (the next may go through); ``status``: the service's, if it answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PlaceUnavailable(RuntimeError):
    """The place cannot go on (no answer, 5xx, a wrong API key, the store down)."""


class StorePlace:
    """A store, used directly; ``namespace``: one API key's conversations, keys as its clients send them."""

    def __init__(self, store: ChatHistoryStore, namespace: str | None = None) -> None:
        if namespace is not None and not re.fullmatch(NAMESPACE_PATTERN, namespace):
            raise ValueError(f"--namespace {namespace!r}: a namespace is 1 to 64 letters, digits, '_' or '-'")
        self.store = store
        self.caller = Caller(namespace, "chatlab operations")
        self._check = KeyRule(ServiceSettings()).check  # the service's own (and settings), never copied

    def check_key(self, key: str) -> None:
        """Refuse a key the service would refuse, so that what is imported can be reached through it."""
        try:
            self._check(key)
        except Refused as exc:
            raise PlaceError(exc.detail) from None
        if not is_plain(key):  # the store's namespace separator: the key would land in another namespace
            raise PlaceError(
                f"invalid conversationKey: {NAMESPACE_SEPARATOR!r} separates a namespace from a key in the store; "
                "to import one namespace's conversations give --namespace NAME and keys without it"
            )
        if key in (".", ".."):  # a URL path segment clients resolve away: no request could reach it
            raise PlaceError(f"invalid conversationKey: {key!r} cannot be a path segment of a request")

    async def left_out(self, page: int = PAGE) -> tuple[int, list[str]]:
        """How many stored conversations lie outside this place's namespace, and the namespaces among them."""
        count, namespaces = 0, set[str]()
        async for summary in self._pages("", page):
            key = summary.conversation_key
            if not self.caller.owns(key):
                count += 1
                if not is_plain(key):
                    namespaces.add(key.split(NAMESPACE_SEPARATOR, 1)[0])
        return count, sorted(namespaces)

    async def summaries(self, page: int = PAGE) -> AsyncIterator[ConversationSummary]:
        """Every conversation of this place's namespace, keys as its clients send them, ``page`` per store call."""
        prefix = self.caller.prefix
        async for summary in self._pages(prefix, page, plain=self.caller.plain):
            yield _unprefixed(summary, len(prefix))

    async def _pages(self, prefix: str, page: int, *, plain: bool = False) -> AsyncIterator[ConversationSummary]:
        listing = walk(self.store, prefix, page, plain=plain)
        while True:
            summary = await self._call(anext(listing, None))
            if summary is None:
                return
            yield summary

    async def summary(self, key: str) -> ConversationSummary | None:
        """One conversation's summary (``None``: none)."""
        found = await self._call(summary_of(self.store, self.caller.stored_key(key)))
        return None if found is None else _unprefixed(found, len(self.caller.prefix))

    async def set_metadata(self, key: str, change: MetadataChange) -> None:
        """Make ``change`` to the conversation's title and tags (nothing if it is gone)."""
        await self._call(self.store.set_metadata(self.caller.stored_key(key), change))

    async def read(self, key: str) -> tuple[list[bytes], str]:
        """The conversation's messages as stored, and its version."""
        conversation = await self._call(self.store.read(self.caller.stored_key(key)))
        return conversation.messages, conversation.version

    async def write(self, key: str, messages: Sequence[bytes], if_match: str, *, append: bool = False) -> None:
        """Replace (or append to) the conversation's messages, over version ``if_match``."""
        write = self.store.append if append else self.store.replace
        await self._call(write(self.caller.stored_key(key), messages, if_match=[if_match]))

    async def _call(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except (VersionMismatch, PlaceError):
            raise
        except StoreError as exc:
            raise PlaceUnavailable(f"the store is unavailable: {exc}") from None
        except Exception as exc:  # the store refused this conversation (a value its database cannot hold)
            raise PlaceError(f"the store refused it: {type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        """Close the store."""
        await self.store.close()


class ServicePlace:
    """A running chat history service, through :class:`~chatlab.client.http.AsyncChatHistoryClient` (with its API
    key when it has keys on): the client's requests, retries and errors, each translated into the place's."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        self.client = AsyncChatHistoryClient(url, api_key=api_key or "", timeout=timeout)
        self.url = self.client.url

    def check_key(self, key: str) -> None:
        """Nothing here: the service checks each key itself (a refusal is a 4xx)."""

    async def summaries(self, page: int = PAGE) -> AsyncIterator[ConversationSummary]:
        """Every conversation of the service, ``page`` per request (its ``Link: rel="next"`` followed)."""
        listing = self.client.iter_summaries(page_size=page)
        while True:
            summary = await self._call(anext(listing, None))
            if summary is None:
                return
            yield summary

    async def summary(self, key: str) -> ConversationSummary | None:
        """Listed from just before ``key``: every key between ``key[:-1]`` and ``key`` starts with ``key[:-1]``,
        so the page from there usually starts with ``key``."""
        try:
            return await self._find(key, key[:-1])
        except PlaceError as exc:
            if exc.status != 400:
                raise
            return await self._find(key, None)  # a service that takes only whole keys as ``after``: from the start

    async def _find(self, key: str, after: str | None) -> ConversationSummary | None:
        while True:
            page = await self._call(self.client.summaries_page(after=after or None, limit=100))
            first = next((summary for summary in page.summaries if summary.conversation_key >= key), None)
            if first is not None:  # the listing is in key order: ``key`` is here or nowhere
                return first if first.conversation_key == key else None
            if page.next_after is None:
                return None
            after = page.next_after

    async def set_metadata(self, key: str, change: MetadataChange) -> None:
        """``PATCH``; one naming more tags than a ``PATCH`` takes goes as two: the removals, then the tags set."""
        patches: list[dict[str, Any]] = [{"tags": dict(change.tags)}]
        if len(change.tags) > MAX_TAGS:
            patches = [
                {"tags": {n: v for n, v in change.tags.items() if (v is None) is removals}}
                for removals in (True, False)
            ]
        if change.sets_title:
            patches[0]["title"] = change.title
        for patch in patches:
            try:
                await self._call(self.client.patch(key, patch))
            except PlaceError as exc:
                if exc.status != 404:  # 404: gone meanwhile, nothing to set
                    raise
                return

    async def read(self, key: str) -> tuple[list[bytes], str]:
        """The conversation's messages as the service sent them, and its version."""
        held = await self._call(self.client.read_body(key))
        return split_array(held.body), str(held.version) if held.version is not None else ABSENT

    async def write(self, key: str, messages: Sequence[bytes], if_match: str, *, append: bool = False) -> None:
        """``PUT`` (replace) or ``POST`` (append) the messages, over version ``if_match``."""
        array = b"[" + b",".join(messages) + b"]"
        condition = Version.parse(if_match) or f'"{if_match}"'
        if append:
            await self._call(self.client.append(key, array, if_match=condition))
        else:
            await self._call(self.client.replace(key, array, if_match=condition))

    async def _call(self, work: Awaitable[T]) -> T:
        """The client's answer, its errors as the place's (it retried no answer, 429 and 502-504 already)."""
        try:
            return await work
        except ChatHistoryServiceConflict as exc:
            raise VersionMismatch(str(exc.current or ABSENT)) from None
        except ChatHistoryServiceStatusError as exc:
            status = exc.status or 0
            if status in (401, 403):
                raise PlaceUnavailable(f"{self.url} answered {status}: {exc.detail} (check --api-key)") from None
            if status == 429 or status >= 500:
                raise PlaceUnavailable(f"{self.url} answered {status}: {exc.detail}") from None
            raise PlaceError(f"{self.url} answered {status}: {exc.detail}", status) from None
        except ChatHistoryServiceProtocolError as exc:  # not the service's answer
            raise PlaceUnavailable(str(exc)) from None
        except ChatHistoryServiceUnavailable as exc:
            raise PlaceUnavailable(f"no answer from {self.url}: {exc}") from None

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()


async def walk(
    store: ChatHistoryStore, prefix: str = "", page: int = PAGE, *, plain: bool = False
) -> AsyncGenerator[ConversationSummary, None]:
    """Every conversation of ``store`` whose key starts with ``prefix`` (``plain``: and lies outside every
    namespace), in key order."""
    after: str | None = None
    while True:
        listed = await store.summaries(prefix, after=after, limit=page, plain=plain)
        for summary in listed:
            yield summary
        if len(listed) < page:
            return
        after = listed[-1].conversation_key


#: Where an export reads and an import writes.
Place: TypeAlias = StorePlace | ServicePlace


def _unprefixed(summary: ConversationSummary, length: int) -> ConversationSummary:
    return dataclasses.replace(summary, conversation_key=summary.conversation_key[length:]) if length else summary


def open_place(
    store: str | None = None, url: str | None = None, api_key: str | None = None, namespace: str | None = None
) -> Place:
    """A store by URL, or a service at ``url``: one of the two."""
    if (store is None) == (url is None):
        raise ValueError("give either a store URL (--store) or a running service (--url), not both or neither")
    if url is not None:
        if namespace is not None:
            raise ValueError("--namespace is for --store: a service's namespace is its API key's (--api-key)")
        return ServicePlace(url, api_key)
    if store in ("", "memory", "memory://"):
        raise ValueError(
            "memory:// is the memory of one process: export from or import into a running service "
            "(--url), or a store another process can open (sqlite, postgresql, redis)"
        )
    return StorePlace(open_store(store), namespace)
