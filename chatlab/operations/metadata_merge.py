"""What title and tags a migration leaves on a target conversation: the source's, without undoing what the target's
own clients wrote.

Titles and tags are no part of a conversation's version, so whether the target's clients changed a field is told by
comparing it with a *base*: the target's metadata as the migration last wrote it there, or, before it wrote any, as
it first saw it. For the title and each tag name:

* the target no longer holds the base's value: its clients wrote it during the migration, and it stays;
* else the source's value when the source has one, else the target's (so a tag removed in the source after its copy,
  or one only the target carries, stays).

A conversation carries at most :data:`~chatlab.stores.metadata.MAX_TAGS` tags: the target's own come first, then the
source's in name order while they fit. The migration writes the result only over the metadata it read
(:class:`~chatlab.stores.base.Metadata` as a condition) and decides again when the target changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..stores.base import ConversationSummary, Metadata
from ..stores.metadata import MAX_TAGS, MetadataChange


def metadata_of(summary: ConversationSummary | None) -> Metadata:
    """A conversation's title and tags (an absent one carries none)."""
    if summary is None:
        return Metadata()
    return Metadata(summary.title, dict(summary.tags))


def merged(source: ConversationSummary, target: ConversationSummary | None, base: Metadata | None) -> Metadata:
    """The title and tags the target should carry (see the module's rule); ``base`` ``None``: the target as it is."""
    there = metadata_of(target)
    if base is None:
        base = there
    title = _field(source.title, there.title, base.title)
    tags: dict[str, str] = {}
    for name in sorted(set(source.tags) | set(there.tags)):
        value = _field(source.tags.get(name), there.tags.get(name), base.tags.get(name))
        if value is not None:
            tags[name] = value
    return Metadata(title, _fitted(tags, there.tags))


def _field(source: str | None, target: str | None, base: str | None) -> str | None:
    """One field's value after the merge (``None``: none)."""
    if target != base:
        return target  # written on the target since the base
    return source if source is not None else target


def _fitted(tags: dict[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """At most MAX_TAGS tags: those the target carries (``own``) first, then the others in name order."""
    if len(tags) <= MAX_TAGS:
        return tags
    order = sorted(tags, key=lambda name: (name not in own, name))
    return {name: tags[name] for name in order[:MAX_TAGS]}


def change_to(wanted: Metadata, target: ConversationSummary) -> MetadataChange | None:
    """The change that gives ``target`` the ``wanted`` metadata (``None``: it carries it already)."""
    if metadata_of(target) == wanted:
        return None
    removed: dict[str, str | None] = {name: None for name in target.tags if name not in wanted.tags}
    return MetadataChange(wanted.title, True, {**removed, **wanted.tags})
