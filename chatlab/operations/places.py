"""Where conversations come from and go to (:data:`Place`): a store opened by URL, or a running service over HTTP.

Both write only over the version read (``if_match``; ``If-Match`` over HTTP), each write one store call or request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from contextlib import aclosing
from typing import Any, TypeAlias, TypeVar
from urllib.parse import quote

import httpx

from ..client.errors import ChatHistoryServiceProtocolError
from ..client.operations import summary_from_json
from ..service.keys import KeyRule
from ..service.security.auth import NAMESPACE_PATTERN, SEPARATOR, Caller
from ..service.settings import ServiceSettings
from ..stores import ChatHistoryStore, open_store
from ..stores.base import ABSENT, StoreError, VersionMismatch
from ..stores.metadata import MAX_TAGS, MetadataChange
from ..vocabulary import ConversationSummary, Refused, Version
from .lines import split_array

T = TypeVar("T")

#: Tries of a request that got no answer or a 5xx/429 before the place counts as unavailable.
TRIES = 4
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
        if SEPARATOR in key:  # the store's namespace separator: the key would land in another namespace
            raise PlaceError(
                f"invalid conversationKey: {SEPARATOR!r} separates a namespace from a key in the store; "
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
                if SEPARATOR in key:
                    namespaces.add(key.split(SEPARATOR, 1)[0])
        return count, sorted(namespaces)

    async def summaries(self, page: int = PAGE) -> AsyncIterator[ConversationSummary]:
        prefix = self.caller.prefix
        async for summary in self._pages(prefix, page):
            if self.caller.owns(summary.conversation_key):
                yield _unprefixed(summary, len(prefix))

    async def _pages(self, prefix: str, page: int) -> AsyncIterator[ConversationSummary]:
        listing = walk(self.store, prefix, page)
        while (summary := await self._call(anext(listing, None))) is not None:
            yield summary

    async def summary(self, key: str) -> ConversationSummary | None:
        found = await self._call(summary_of(self.store, self.caller.stored_key(key)))
        return None if found is None else _unprefixed(found, len(self.caller.prefix))

    async def set_metadata(self, key: str, change: MetadataChange) -> None:
        await self._call(self.store.set_metadata(self.caller.stored_key(key), change))

    async def read(self, key: str) -> tuple[list[bytes], str]:
        conversation = await self._call(self.store.read(self.caller.stored_key(key)))
        return conversation.messages, conversation.version

    async def write(self, key: str, messages: Sequence[bytes], if_match: str, *, append: bool = False) -> None:
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
        await self.store.close()


class ServicePlace:
    """A running chat history service, over HTTP (with its API key when it has keys on)."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)

    def check_key(self, key: str) -> None:
        """Nothing here: the service checks each key itself (a refusal is a 4xx)."""

    async def summaries(self, page: int = PAGE) -> AsyncIterator[ConversationSummary]:
        async for listed in self._listing(page, None):
            for summary in listed:
                yield summary

    async def _listing(self, page: int, after: str | None) -> AsyncGenerator[list[ConversationSummary], None]:
        """``GET /chat-history?limit=page`` (from ``after``), then each ``Link: <...>; rel="next"`` it gives."""
        params = {"limit": str(page)} | ({"after": after} if after else {})
        response = await self._request("GET", "/chat-history", params=params)
        while True:
            try:
                summaries = [summary_from_json(item, self.url) for item in response.json()]
            except (ChatHistoryServiceProtocolError, ValueError, TypeError) as exc:  # not the service's listing
                raise PlaceUnavailable(f"{self.url} answered GET /chat-history with something else: {exc}") from None
            yield summaries
            following = response.links.get("next", {}).get("url")
            if not following:
                return
            response = await self._request("GET", following)

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
        async with aclosing(self._listing(100, after)) as pages:
            async for listed in pages:
                first = next((summary for summary in listed if summary.conversation_key >= key), None)
                if first is not None:  # the listing is in key order: ``key`` is here or nowhere
                    return first if first.conversation_key == key else None
        return None

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
                await self._request("PATCH", _path(key), json=patch)
            except PlaceError as exc:
                if exc.status != 404:  # 404: gone meanwhile, nothing to set
                    raise
                return

    async def read(self, key: str) -> tuple[list[bytes], str]:
        response = await self._request("GET", _path(key))
        version = Version.from_etag(response.headers.get("etag"))
        return split_array(response.content), str(version) if version is not None else ABSENT

    async def write(self, key: str, messages: Sequence[bytes], if_match: str, *, append: bool = False) -> None:
        """``PUT`` (replace) or ``POST`` (append) the messages, over version ``if_match``."""
        body = b'{"messages":[' + b",".join(messages) + b"]}"
        headers = {"Content-Type": "application/json", "If-Match": f'"{if_match}"'}
        await self._request("POST" if append else "PUT", _path(key), content=body, headers=headers)

    async def _request(self, method: str, path: str, **options: object) -> httpx.Response:
        """The answer, retried on no answer, 429 and 5xx (a write is conditional, so a retry never doubles it)."""
        problem = ""
        for attempt in range(TRIES):
            if attempt:
                await asyncio.sleep(min(2.0, 0.25 * 2**attempt))
            try:
                response = await self.http.request(method, path, **options)  # type: ignore[arg-type]
            except httpx.HTTPError as exc:
                problem = f"no answer from {self.url} ({type(exc).__name__}: {exc})"
                continue
            status = response.status_code
            if status == 429 or status >= 500:
                problem = f"{self.url} answered {status}: {_detail(response)}"
                continue
            if status == 412:
                raise VersionMismatch(str(Version.from_etag(response.headers.get("etag")) or ABSENT))
            if status in (401, 403):
                raise PlaceUnavailable(f"{self.url} answered {status}: {_detail(response)} (check --api-key)")
            if status >= 400:
                raise PlaceError(f"{self.url} answered {status}: {_detail(response)}", status)
            return response
        raise PlaceUnavailable(f"{problem} ({TRIES} tries)")

    async def close(self) -> None:
        await self.http.aclose()


async def walk(
    store: ChatHistoryStore, prefix: str = "", page: int = PAGE
) -> AsyncGenerator[ConversationSummary, None]:
    """Every conversation of ``store`` whose key starts with ``prefix``, in key order."""
    after: str | None = None
    while True:
        listed = await store.summaries(prefix, after=after, limit=page)
        for summary in listed:
            yield summary
        if len(listed) < page:
            return
        after = listed[-1].conversation_key


async def summary_of(store: ChatHistoryStore, key: str) -> ConversationSummary | None:
    """One conversation's summary (``None``: none): the first key starting with ``key`` is ``key`` if it exists."""
    listed = await store.summaries(key, limit=1)
    return listed[0] if listed and listed[0].conversation_key == key else None


#: Where an export reads and an import writes.
Place: TypeAlias = StorePlace | ServicePlace


def _unprefixed(summary: ConversationSummary, length: int) -> ConversationSummary:
    return dataclasses.replace(summary, conversation_key=summary.conversation_key[length:]) if length else summary


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    return str(detail)[:300]


def _path(key: str) -> str:
    return f"/chat-history/{quote(key, safe='')}"


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
