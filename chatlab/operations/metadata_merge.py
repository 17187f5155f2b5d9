"""What title and tags a migration leaves on a target conversation: the source's, without discarding any the target
holds (as with messages: a client may have written them there).

Titles and tags are no part of a conversation's version, so whether the target's clients changed a field is told by
comparing it with a *base*: the target's metadata as this migration last wrote it there. For the title and each tag
name:

* with a base, the target still holding the base's value: the source's value (it may have changed since the copy),
  unless the source has none (a tag removed in the source stays);
* otherwise (the target changed it since the migration wrote it, or held it before): the target's value, and the
  source's only where the target has none.

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
    """The title and tags the target should carry (see the module's rule); ``base`` ``None``: the migration wrote
    none there."""
    there = metadata_of(target)
    title = _field(source.title, there.title, base.title if base is not None else None, base is not None)
    tags: dict[str, str] = {}
    for name in sorted(set(source.tags) | set(there.tags)):
        was = base.tags.get(name) if base is not None else None
        value = _field(source.tags.get(name), there.tags.get(name), was, base is not None)
        if value is not None:
            tags[name] = value
    return Metadata(title, _fitted(tags, there.tags))


def _field(source: str | None, target: str | None, base: str | None, written: bool) -> str | None:
    """One field's value after the merge (``None``: none); ``written``: the migration wrote ``base`` there."""
    if written and target == base:
        return source if source is not None else target
    return target if target is not None else source


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
