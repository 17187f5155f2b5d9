"""Where conversations come from and go to: a store opened by URL, or a running service over HTTP.

Both give the same operations, each with the conversation's version, so the importer can write
only over what it read (``if_match``; ``If-Match`` over HTTP) and never half a conversation (each
write is one atomic store call, or one request). Failures come in two kinds: :class:`PlaceError`,
this conversation was refused (a bad key, too large: the next one may go through), and
:class:`PlaceUnavailable`, the place cannot go on (unreachable, a wrong API key, a store that is
down): the caller stops and says where.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar
from urllib.parse import quote

import httpx

from ..service.parameters import conversation_key_check
from ..service.security.auth import NAMESPACE_PATTERN, SEPARATOR, Caller
from ..service.settings import ServiceSettings
from ..stores import ChatHistoryStore, open_store
from ..stores.base import ABSENT, StoreError, VersionMismatch
from ..vocabulary import Refused, Version
from .lines import split_array

T = TypeVar("T")

#: Tries of a request that got no answer or a 5xx/429 before the place counts as unavailable.
TRIES = 4


class PlaceError(RuntimeError):
    """The place refused this conversation (a service's 4xx, a key the service would refuse): what it said."""


class PlaceUnavailable(RuntimeError):
    """The place cannot go on (no answer, 5xx, a wrong API key, the store down): what happened."""


class Place(Protocol):
    """Conversations somewhere, read and written with their versions."""

    def check_key(self, key: str) -> None: ...

    async def keys(self) -> list[str]: ...

    async def read(self, key: str) -> tuple[list[bytes], str]: ...

    async def replace(self, key: str, messages: Sequence[bytes], if_match: str) -> None: ...

    async def append(self, key: str, messages: Sequence[bytes], if_match: str) -> None: ...

    async def close(self) -> None: ...


def service_key_check(settings: ServiceSettings | None = None) -> Callable[[str], str]:
    """The service's own conversation-key check (its pattern and length, ``CHATLAB_KEY_*``, and whatever else it
    refuses); raises ``Refused``. Taken from the service, never copied."""
    return conversation_key_check(settings or ServiceSettings())


class StorePlace:
    """A store, used directly (the service need not run); ``namespace``: the conversations of one API key's
    namespace, their keys as its clients send them (the store keeps ``namespace/key``)."""

    def __init__(
        self, store: ChatHistoryStore, namespace: str | None = None, settings: ServiceSettings | None = None
    ) -> None:
        if namespace is not None and not re.fullmatch(NAMESPACE_PATTERN, namespace):
            raise ValueError(f"--namespace {namespace!r}: a namespace is 1 to 64 letters, digits, '_' or '-'")
        self.store = store
        self.caller = Caller(namespace, "chatlab operations")
        self._check = service_key_check(settings)

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

    def left_out(self, keys: Sequence[str]) -> list[str]:
        """The stored keys outside this place's namespace (a namespaced key when none is given)."""
        return [key for key in keys if not self.caller.owns(key)]

    async def stored_keys(self) -> list[str]:
        return [s.conversation_key for s in await self._call(self.store.summaries())]

    async def keys(self) -> list[str]:
        prefix = self.caller.prefix
        return [key[len(prefix) :] for key in await self.stored_keys() if self.caller.owns(key)]

    async def read(self, key: str) -> tuple[list[bytes], str]:
        conversation = await self._call(self.store.read(self.caller.stored_key(key)))
        return conversation.messages, conversation.version

    async def replace(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        await self._call(self.store.replace(self.caller.stored_key(key), messages, if_match=[if_match]))

    async def append(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        await self._call(self.store.append(self.caller.stored_key(key), messages, if_match=[if_match]))

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
        """Nothing here: the service checks each key itself, with its own settings (a refusal is a 4xx)."""

    async def keys(self) -> list[str]:
        listing = (await self._request("GET", "/chat-history")).json()
        return [str(item["conversationKey"]) for item in listing]

    async def read(self, key: str) -> tuple[list[bytes], str]:
        response = await self._request("GET", _path(key))
        version = Version.from_etag(response.headers.get("etag"))
        return split_array(response.content), str(version) if version is not None else ABSENT

    async def replace(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        await self._send("PUT", key, messages, if_match)

    async def append(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        await self._send("POST", key, messages, if_match)

    async def _send(self, method: str, key: str, messages: Sequence[bytes], if_match: str) -> None:
        body = b'{"messages":[' + b",".join(messages) + b"]}"
        headers = {"Content-Type": "application/json", "If-Match": f'"{if_match}"'}
        await self._request(method, _path(key), content=body, headers=headers)

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
            if response.status_code == 429 or response.status_code >= 500:
                problem = f"{self.url} answered {response.status_code}: {_detail(response)}"
                continue
            return self._checked(response)
        raise PlaceUnavailable(f"{problem} ({TRIES} tries)")

    def _checked(self, response: httpx.Response) -> httpx.Response:
        status = response.status_code
        if status == 412:
            raise VersionMismatch(str(Version.from_etag(response.headers.get("etag")) or ABSENT))
        if status in (401, 403):
            raise PlaceUnavailable(f"{self.url} answered {status}: {_detail(response)} (check --api-key)")
        if status >= 400:
            raise PlaceError(f"{self.url} answered {status}: {_detail(response)}")
        return response

    async def close(self) -> None:
        await self.http.aclose()


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
    """A store by URL (``namespace``: one API key's conversations in it), or a service at ``url``: one of the two."""
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
