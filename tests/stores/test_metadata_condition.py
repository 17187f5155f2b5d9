"""A metadata condition (what a migration writes under, so that it never undoes a PATCH made on the target): a change
or a restore made only if the conversation carries exactly the expected title and tags, on every store."""

from __future__ import annotations

import pytest

from chatlab.stores import ChatHistoryStore
from chatlab.stores.base import ABSENT, ConversationRecord, Metadata, MetadataChanged, new_version
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
