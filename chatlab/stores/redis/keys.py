"""Where the Redis store keeps what: the names of its keys (layout version 4).

Every name starts with the store's prefix (``chatlab:`` unless the URL says ``?prefix=...``). A conversation
belongs to one of the store's *buckets* (a CRC-32 of its key, modulo the bucket count, which the store records
when it creates its layout), and every key of a conversation, and its bucket's indexes, carry the bucket as a
Redis Cluster hash tag, ``{N}``. So one conversation's keys and the indexes its writes update share one hash
slot: each Lua script touches one slot, as Redis Cluster requires, and the buckets spread the conversations over
the cluster's nodes. On a single server the store has one bucket unless told otherwise.

* ``{prefix}meta``: a hash; ``schema_version`` is the layout's version, ``buckets`` the bucket count.
* ``{prefix}{N}:conversations``: a sorted set of the bucket's conversation keys, all with score 0, so Redis
  orders them by their bytes (UTF-8: code point order, as the other stores). A listing page reads its share of
  the page from each bucket (``ZRANGEBYLEX ... LIMIT``, from the last key of the page before) and merges them.
* ``{prefix}{N}:updated``: the bucket's conversation keys scored by their last write (retention's sweep).
* ``{prefix}{N}:messages:{key}``: the conversation's messages, in order, as the bytes they were given.
* ``{prefix}{N}:version:{key}``: its version (a conversation upgraded from layout 1 has none and reads as
  ``unversioned`` until its next write).
* ``{prefix}{N}:times:{key}``: ``"<created> <updated>"``, seconds since the epoch by the store's clock.
* ``{prefix}{N}:metadata:{key}``: its metadata, a hash: ``title``, and ``tag:{name}`` for each tag (absent:
  none). It has no expiry (the sweep finds the conversation's tag index entries through it): retention's sweep
  deletes it with them, and so does a write that creates the conversation again after its other keys expired;
  until then it is ignored, as the conversation reads as absent. A store from before metadata has none: the layout
  version stays 4.
* ``{prefix}{N}:tag:{len}:{name}:{value}``: a sorted set of the bucket's conversation keys carrying that tag with
  that value (``len``: the name's length in bytes), all with score 0: what a tag-filtered listing reads.
* ``{prefix}{N}:idempotency:{len(key)}:{key}:{idempotency key}``: ``"<fingerprint> <version>"`` of an idempotent
  append, expiring after its TTL.

The scripts that walk a bucket (listing, the sweep) name its conversations' keys from ``{prefix}{N}:`` as
:class:`Layout` does, and the tag indexes are named in the scripts only.

A prefix that itself holds a hash tag (``app{x}:``) puts the whole store in one slot: it still works on a
cluster, on one node.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConversationKeys:
    """The keys one conversation's scripts take (all in one hash slot)."""

    index: bytes
    messages: bytes
    version: bytes
    times: bytes
    updated: bytes
    metadata: bytes


@dataclass(frozen=True, slots=True)
class BucketKeys:
    """A bucket's indexes, and the start of its key names (``{prefix}{N}:``) to which its scripts add the rest."""

    index: bytes
    updated: bytes
    base: bytes


class Layout:
    """The key names of one store: its prefix and bucket count."""

    def __init__(self, prefix: str, buckets: int) -> None:
        if buckets < 1:
            raise ValueError(f"a Redis store needs at least one bucket (got buckets={buckets})")
        self.prefix = prefix
        self.buckets = buckets
        self.meta = f"{prefix}meta".encode()
        self._bases = [f"{prefix}{{{bucket}}}:".encode() for bucket in range(buckets)]

    def bucket(self, conversation_key: str) -> int:
        """The bucket of a conversation (the same in every process: CRC-32 is fixed)."""
        if self.buckets == 1:
            return 0
        return zlib.crc32(conversation_key.encode("utf-8")) % self.buckets

    def of_bucket(self, bucket: int) -> BucketKeys:
        base = self._bases[bucket]
        return BucketKeys(base + b"conversations", base + b"updated", base)

    def conversation(self, conversation_key: str) -> ConversationKeys:
        base = self._bases[self.bucket(conversation_key)]
        key = conversation_key.encode("utf-8")
        return ConversationKeys(
            base + b"conversations",
            base + b"messages:" + key,
            base + b"version:" + key,
            base + b"times:" + key,
            base + b"updated",
            base + b"metadata:" + key,
        )

    def idempotency(self, conversation_key: str, idempotency_key: str) -> bytes:
        # the length makes the split unambiguous whatever characters the two keys hold
        base = self._bases[self.bucket(conversation_key)]
        return base + f"idempotency:{len(conversation_key)}:{conversation_key}:{idempotency_key}".encode()
