"""The Redis store's key names (layout 6, tabled in docs/stores.md). A conversation's keys and its bucket's indexes
start with ``{prefix}{N}:``, its bucket N as a Redis Cluster hash tag: each script touches one hash slot, and the
buckets spread the conversations over the nodes. The scripts name the tag indexes, and the plain index within the
scripts that write a conversation."""

from __future__ import annotations

import zlib
from typing import NamedTuple


class ConversationKeys(NamedTuple):
    """A conversation's keys, in the order the scripts on one conversation take them."""

    conversations: bytes
    messages: bytes
    version: bytes
    times: bytes
    updated: bytes
    metadata: bytes
    participants: bytes  # a hash: each author's name and how many of the messages it signed


class Layout:
    """The key names of one store: its prefix and bucket count."""

    def __init__(self, prefix: str, buckets: int) -> None:
        if buckets < 1:
            raise ValueError(f"a Redis store needs at least one bucket (got buckets={buckets})")
        self.prefix = prefix
        self.buckets = buckets
        #: ``{prefix}{N}:`` of each bucket N.
        self.bases = [f"{prefix}{{{bucket}}}:".encode() for bucket in range(buckets)]

    def index(self, bucket: int, plain: bool = False) -> bytes:
        """A bucket's index of its conversations' keys, or (``plain``) of those outside every namespace alone."""
        return self.bases[bucket] + (b"plain" if plain else b"conversations")

    def bucket(self, conversation_key: str) -> int:
        """The bucket of a conversation (the same in every process: CRC-32 is fixed)."""
        return zlib.crc32(conversation_key.encode("utf-8")) % self.buckets

    def conversation(self, conversation_key: str) -> ConversationKeys:
        """The keys of a conversation, in the order every script on one conversation reads them as KEYS."""
        bucket = self.bucket(conversation_key)
        base = self.bases[bucket]
        key = conversation_key.encode("utf-8")
        return ConversationKeys(
            self.index(bucket),
            base + b"messages:" + key,
            base + b"version:" + key,
            base + b"times:" + key,
            base + b"updated",
            base + b"metadata:" + key,
            base + b"participants:" + key,
        )

    def idempotency(self, conversation_key: str, idempotency_key: str) -> bytes:
        """``{prefix}{N}:idempotency:{len(key)}:{key}:{idempotency key}`` (the length keeps the split unambiguous)."""
        base = self.bases[self.bucket(conversation_key)]
        return base + f"idempotency:{len(conversation_key)}:{conversation_key}:{idempotency_key}".encode()
