"""A quick check that a body's messages are certainly valid, so the common body skips pydantic's slower models.

The msgspec structs below are built from the schema's own table of checked fields (:mod:`.schema`), so what they
accept the models accept; anything they refuse or cannot tell goes to pydantic, which decides and words the refusal.
"""

from __future__ import annotations

import types
from datetime import datetime
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
from pydantic import StrictBool, StrictStr

Json = Any


def structs(checked: dict[str, dict[str, tuple[Any, Any]]], tag_name: str) -> Any:
    """A struct whose ``messages`` is a list of messages as msgspec structs: one per ``$type`` of ``checked``
    (tagged), other keys allowed; ``tag_name`` is the name of the models' tag field. A struct, not ``list[...]``:
    msgspec keeps a struct's type information, but collects a generic alias's anew on every ``convert`` (about
    half of the check's time)."""

    class Content(msgspec.Struct, tag_field="$type", kw_only=True):
        annotations: list[dict[str, Json]] | None = None
        additionalProperties: dict[str, Json] | None = None

    # pydantic reads a content's tag from this key too (the tag field's own name): one that holds it, whatever
    # the value, is left to pydantic (UNSET is the only value this type takes, and no JSON value is it)
    kinds_fields = [(tag_name, msgspec.UnsetType, msgspec.UNSET)]

    kinds = [
        msgspec.defstruct(
            f"{name}Content",
            kinds_fields
            + [
                (field, _plain(annotation), _default(default)) for field, (annotation, default) in checked[name].items()
            ],
            bases=(Content,),
            tag=name,
            kw_only=True,
        )
        for name in checked
    ]
    message = msgspec.defstruct(
        "ChatMessage",
        [
            ("role", Annotated[str, msgspec.Meta(min_length=1)]),
            ("contents", list[Union[tuple(kinds)]]),  # type: ignore[misc]  # noqa: UP007 - built at run time
            ("authorName", str | None, None),
            ("createdAt", str | None, None),  # ISO 8601: see valid()
            ("messageId", str | None, None),
            ("additionalProperties", dict[str, Json] | None, None),
        ],
        kw_only=True,
    )
    return msgspec.defstruct("Messages", [("messages", list[message])])  # type: ignore[valid-type]


def valid(messages: list[Json], checked_type: Any) -> bool:
    """Whether ``messages`` are certainly valid (``False``: pydantic must decide); ``checked_type`` is what
    :func:`structs` made."""
    try:
        converted = msgspec.convert({"messages": messages}, checked_type).messages
    except msgspec.ValidationError:
        return False
    for message in converted:
        if message.createdAt is not None:
            try:
                datetime.fromisoformat(message.createdAt)
            except ValueError:
                return False
    return True


def _plain(annotation: Any) -> Any:
    """A field's type as msgspec checks it: pydantic's strict ``str`` and ``bool`` are msgspec's own (strict)."""
    if get_origin(annotation) in (Union, types.UnionType):
        return Union[tuple(_plain(member) for member in get_args(annotation))]  # noqa: UP007 - built at run time
    return {id(StrictStr): str, id(StrictBool): bool}.get(id(annotation), annotation)


def _default(default: Any) -> Any:
    """Pydantic's ``...`` (required) as msgspec's."""
    return msgspec.NODEFAULT if default is ... else default
