"""A metadata condition (what a migration writes under, so that it never undoes a PATCH made on the target): a change
or a restore made only if the conversation carries exactly the expected title and tags, on every store; and the
version condition a PATCH's ``If-Match`` writes under, checked by the store in the step that writes."""

from __future__ import annotations

import pytest

from chatlab.stores import ChatHistoryStore
from chatlab.stores.base import (
    ABSENT,
    ANY,
    ConversationRecord,
    Metadata,
    MetadataChanged,
    VersionMismatch,
    new_version,
)
from chatlab.stores.metadata import MetadataChange
from tests.stores.store_helpers import run_with_store

M = b'{"role":"user","contents":[]}'


def test_a_change_is_made_only_over_the_expected_metadata(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        await store.append("c", [M])
        await store.set_metadata("c", MetadataChange("t", True, {"a": "1"}))
        with pytest.raises(MetadataChanged) as refused:
            await store.set_metadata("c", MetadataChange("new", True), expected=Metadata("t", {"a": "2"}))
        assert (refused.value.title, refused.value.tags) == ("t", {"a": "1"})
        with pytest.raises(MetadataChanged):
            await store.set_metadata("c", MetadataChange("new", True), expected=Metadata(None, {"a": "1"}))
        with pytest.raises(MetadataChanged):  # a tag more than expected
            await store.set_metadata("c", MetadataChange("new", True), expected=Metadata("t", {}))
        [held] = await store.summaries("c")
        assert (held.title, held.tags) == ("t", {"a": "1"})  # nothing written
        changed = await store.set_metadata("c", MetadataChange("new", True), expected=Metadata("t", {"a": "1"}))
        assert changed is not None and (changed.title, changed.tags) == ("new", {"a": "1"})
        assert await store.set_metadata("absent", MetadataChange("x", True), expected=Metadata()) is None

    run_with_store(store_url, work)


def test_a_change_is_made_only_at_the_if_match_version(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        seen = (await store.append("c", [M])).version
        current = (await store.append("c", [M])).version  # an append lands after the client read
        with pytest.raises(VersionMismatch) as refused:
            await store.set_metadata("c", MetadataChange("t", True, {"a": "1"}), if_match=[seen])
        assert refused.value.current == current
        [held] = await store.summaries("c")
        assert (held.title, held.tags, held.version) == (None, {}, current)  # nothing written
        with pytest.raises(VersionMismatch):  # the version is checked before the metadata
            await store.set_metadata("c", MetadataChange("t", True), expected=Metadata("x"), if_match=[seen])
        with pytest.raises(MetadataChanged):
            await store.set_metadata("c", MetadataChange("t", True), expected=Metadata("x"), if_match=[current])
        changed = await store.set_metadata("c", MetadataChange("t", True), if_match=[seen, current])
        assert changed is not None and (changed.title, changed.version) == ("t", current)  # metadata keeps the version
        assert await store.set_metadata("c", MetadataChange("u", True), if_match=[ANY]) is not None

        with pytest.raises(VersionMismatch) as absent:  # "*": only if it exists
            await store.set_metadata("absent", MetadataChange("x", True), if_match=[ANY])
        assert absent.value.current == ABSENT
        with pytest.raises(VersionMismatch):
            await store.set_metadata("absent", MetadataChange("x", True), if_match=[current])
        assert await store.set_metadata("absent", MetadataChange("x", True), if_match=[ABSENT]) is None
        assert await store.summaries("absent") == []

    run_with_store(store_url, work)


def test_a_restore_is_made_only_over_the_expected_metadata(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        written = await store.append("c", [M])
        await store.set_metadata("c", MetadataChange(tags={"a": "1"}))
        record = ConversationRecord("c", [M, M], new_version(2), 1.0, 2.0, written.version, "copied", {"b": "2"})
        with pytest.raises(MetadataChanged):
            await store.restore([_expecting(record, Metadata(None, {}))])
        assert (await store.read("c")).version == written.version  # nothing written
        await store.restore([_expecting(record, Metadata(None, {"a": "1"}))])
        [held] = await store.summaries("c")
        assert (held.message_count, held.title, held.tags) == (2, "copied", {"b": "2"})
        new = ConversationRecord("n", [M], new_version(1), 1.0, 2.0, ABSENT, None, {})
        await store.restore([_expecting(new, Metadata())])  # an absent conversation carries no metadata
        assert (await store.read("n")).messages == [M]

    run_with_store(store_url, work)


def _expecting(record: ConversationRecord, expected: Metadata) -> ConversationRecord:
    from dataclasses import replace

    return replace(record, expected_metadata=expected)
