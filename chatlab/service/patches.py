"""A ``PATCH`` body read with the one metadata rule (:mod:`chatlab.stores.metadata`), which import, migrate and a
fork use too: the JSON is parsed as message bodies are (a repeated key is refused), its shape checked here, and every
title, tag name and value checked by :class:`~chatlab.stores.metadata.MetadataChange` alone."""

from __future__ import annotations

from typing import Any, NoReturn

from ..stores.metadata import MAX_TAGS, MetadataChange, MetadataError
from ..vocabulary import Refused
from . import jsontext

_SHAPE = '{"title": ..., "tags": {...}}'
_FIELDS = ("title", "tags")


def decode_metadata_patch(body: bytes) -> MetadataChange:
    """The change a ``PATCH`` body asks for; a 400 that says what is wrong with a body that is not one."""
    try:
        patch = jsontext.parse(body)
    except jsontext.InvalidJson as exc:
        raise Refused(400, str(exc)) from None
    if not isinstance(patch, dict):
        _refuse("(body)", "must be a JSON object")
    for name in patch:
        if name not in _FIELDS:
            _refuse(name, "is not a field of a metadata patch: name only title and tags")
    title = patch.get("title")
    if title is not None and not isinstance(title, str):
        _refuse("title", "must be a string, or null to remove the title")
    try:
        MetadataChange.setting(title)
    except MetadataError as exc:
        _refuse("title", str(exc))
    tags = _tags(patch.get("tags", {}))
    try:  # the title holds: what is refused now is a tag
        return MetadataChange(title, "title" in patch, tags)
    except MetadataError as exc:
        _refuse("tags", str(exc))


def _tags(tags: Any) -> dict[str, str | None]:
    """The ``tags`` object: names to strings, or to ``null`` to remove; at most :data:`MAX_TAGS` of them."""
    if not isinstance(tags, dict):
        _refuse("tags", "must be an object of tag names to strings (null removes a tag)")
    if len(tags) > MAX_TAGS:
        _refuse("tags", f"names {len(tags)} tags; a conversation carries at most {MAX_TAGS}")
    for name, value in tags.items():
        if value is not None and not isinstance(value, str):
            _refuse(f"tags.{name}", "must be a string, or null to remove the tag")
    return tags


def _refuse(path: str, message: str) -> NoReturn:
    """A 400 naming the field at ``path`` and what is wrong with it."""
    detail = f"{path}: {message} (send {_SHAPE})"
    raise Refused(400, detail, [{"path": path, "message": message}])
