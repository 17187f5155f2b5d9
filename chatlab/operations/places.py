"""Where conversations come from and go to: a store opened by URL, or a running service over HTTP.

Both give the same four operations, each with the conversation's version, so the importer can
write only over what it read (``if_match``; ``If-Match`` over HTTP) and never half a conversation
(each write is one atomic store call, or one request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol
from urllib.parse import quote

import httpx

from ..stores import ChatHistoryStore, open_store
from ..stores.base import ABSENT, VersionMismatch
from ..vocabulary import Version


class PlaceError(RuntimeError):
    """The place refused or failed an operation (a service's 4xx/5xx, say): what it said."""


class Place(Protocol):
    """Conversations somewhere, read and written with their versions."""

    async def keys(self) -> list[str]: ...

    async def read(self, key: str) -> tuple[list[bytes], str]: ...

    async def replace(self, key: str, messages: Sequence[bytes], if_match: str) -> None: ...

    async def append(self, key: str, messages: Sequence[bytes], if_match: str) -> None: ...

    async def close(self) -> None: ...


class StorePlace:
    """A store, used directly (the service need not run)."""

    def __init__(self, store: ChatHistoryStore) -> None:
        self.store = store

    async def keys(self) -> list[str]:
        return [s.conversation_key for s in await self.store.summaries()]

    async def read(self, key: str) -> tuple[list[bytes], str]:
        conversation = await self.store.read(key)
        return conversation.messages, conversation.version

    async def replace(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        await self.store.replace(key, messages, if_match=[if_match])

    async def append(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        await self.store.append(key, messages, if_match=[if_match])

    async def close(self) -> None:
        await self.store.close()


class ServicePlace:
    """A running chat history service, over HTTP (with its API key when it has keys on)."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)

    async def keys(self) -> list[str]:
        listing = self._checked(await self.http.get("/chat-history")).json()
        return [str(item["conversationKey"]) for item in listing]

    async def read(self, key: str) -> tuple[list[bytes], str]:
        response = self._checked(await self.http.get(_path(key)))
        version = Version.from_etag(response.headers.get("etag"))
        messages = split_array(response.content)
        return messages, str(version) if version is not None else ABSENT

    async def replace(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        self._checked(await self._send("PUT", key, messages, if_match))

    async def append(self, key: str, messages: Sequence[bytes], if_match: str) -> None:
        self._checked(await self._send("POST", key, messages, if_match))

    async def _send(self, method: str, key: str, messages: Sequence[bytes], if_match: str) -> httpx.Response:
        body = b'{"messages":[' + b",".join(messages) + b"]}"
        headers = {"Content-Type": "application/json", "If-Match": f'"{if_match}"'}
        return await self.http.request(method, _path(key), content=body, headers=headers)

    def _checked(self, response: httpx.Response) -> httpx.Response:
        if response.status_code == 412:
            raise VersionMismatch(str(Version.from_etag(response.headers.get("etag")) or ABSENT))
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except (ValueError, AttributeError):
                detail = response.text
            raise PlaceError(f"{self.url} answered {response.status_code}: {detail}")
        return response

    async def close(self) -> None:
        await self.http.aclose()


def _path(key: str) -> str:
    return f"/chat-history/{quote(key, safe='')}"


def split_array(body: bytes) -> list[bytes]:
    """The bytes of each element of a JSON array, as they are in ``body`` (the service's stored messages)."""
    from .lines import _DECODER, _list_spans

    text = body.decode("utf-8")
    _DECODER.decode(text)  # a valid array, or ValueError
    start = len(text) - len(text.lstrip())
    spans, _ = _list_spans(text, start)
    return [span.encode("utf-8") for span in spans]


def open_place(store: str | None = None, url: str | None = None, api_key: str | None = None) -> Place:
    """A store by URL, or a service at ``url``: exactly one of the two."""
    if (store is None) == (url is None):
        raise ValueError("give either a store URL (--store) or a running service (--url), not both or neither")
    if url is not None:
        return ServicePlace(url, api_key)
    if store in ("", "memory", "memory://"):
        raise ValueError(
            "memory:// is the memory of one process: export from or import into a running service "
            "(--url), or a store another process can open (sqlite, postgresql, redis)"
        )
    return StorePlace(open_store(store))
