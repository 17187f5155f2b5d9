"""The article's ``InMemoryChatHistoryStore``, in Python."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from .base import ChatHistoryStore, ConversationSummary, EncodedMessage


class _Bucket:
    """One conversation: its messages and the lock that keeps each batch contiguous."""

    __slots__ = ("lock", "messages")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[EncodedMessage] = []


class InMemoryChatHistoryStore(ChatHistoryStore):
    """History in this process's memory, lost when it stops.

    Like the C# original (a ``ConcurrentDictionary`` of buckets, a lock per bucket) it is
    thread-safe, so one store can serve several servers or threads at once. No lock is
    held across an ``await``.
    """

    description = "Chat history is stored in memory and exposed over HTTP."

    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}
        self._buckets_lock = threading.Lock()

    def _bucket(self, conversation_key: str) -> _Bucket:
        bucket = self._buckets.get(conversation_key)
        if bucket is None:
            with self._buckets_lock:
                bucket = self._buckets.setdefault(conversation_key, _Bucket())
        return bucket

    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        bucket = self._buckets.get(conversation_key)
        if bucket is None:
            return []
        with bucket.lock:
            return bucket.messages.copy()

    async def append(self, conversation_key: str, messages: Sequence[EncodedMessage]) -> None:
        if not messages:
            return
        while True:
            bucket = self._bucket(conversation_key)
            with bucket.lock:
                if self._buckets.get(conversation_key) is bucket:  # not deleted meanwhile
                    bucket.messages.extend(messages)
                    return

    async def replace(self, conversation_key: str, messages: Sequence[EncodedMessage]) -> None:
        while True:
            bucket = self._bucket(conversation_key)
            with bucket.lock:
                if self._buckets.get(conversation_key) is bucket:
                    bucket.messages[:] = messages
                    return

    async def delete(self, conversation_key: str) -> None:
        with self._buckets_lock:
            bucket = self._buckets.pop(conversation_key, None)
        if bucket is not None:
            with bucket.lock:  # wait for a write in progress to finish
                bucket.messages.clear()

    async def summaries(self) -> list[ConversationSummary]:
        with self._buckets_lock:
            items = sorted(self._buckets.items())
        result = []
        for key, bucket in items:
            with bucket.lock:
                result.append(ConversationSummary(key, len(bucket.messages)))
        return result
