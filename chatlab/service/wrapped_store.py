"""A store that hands every operation to an inner store through one hook: how metrics and traces watch the store.

The list of a store's operations lives here once, so a wrapper never forgets one that a store gains."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..stores import ChatHistoryStore


def _forwarded(operation: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """A method of :class:`WrappedStore`: the inner store's ``operation``, called through ``around``."""

    async def forwarded(self: WrappedStore, *args: Any, **kwargs: Any) -> Any:
        return await self.around(operation, getattr(self.inner, operation)(*args, **kwargs))

    forwarded.__name__ = forwarded.__qualname__ = operation
    return forwarded


class WrappedStore(ChatHistoryStore):
    """Every operation of ``inner``, each awaited inside :meth:`around` (a subclass's timing, span, ...)."""

    def __init__(self, inner: ChatHistoryStore) -> None:
        self.inner = inner
        self.description = inner.description

    async def around(self, operation: str, call: Awaitable[Any]) -> Any:
        """Await ``call``, the inner store's ``operation``; a subclass measures or records it here."""
        return await call

    read = _forwarded("read")
    read_array = _forwarded("read_array")
    read_slice = _forwarded("read_slice")
    append = _forwarded("append")
    replace = _forwarded("replace")
    delete = _forwarded("delete")
    summaries = _forwarded("summaries")
    set_metadata = _forwarded("set_metadata")
    restore = _forwarded("restore")
    sweep = _forwarded("sweep")

    async def close(self) -> None:
        """Close the inner store."""
        await self.inner.close()
