"""A quick check that a body's messages are certainly valid, so the common body skips pydantic's slower models.

The msgspec structs below are built from the schema's own table of checked fields (:mod:`.schema`), so what they
accept the models accept; anything they refuse or cannot tell goes to pydantic, which decides and words the refusal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Union

import msgspec

Json = Any


def structs(checked: dict[str, dict[str, tuple[Any, Any]]], tag_name: str) -> Any:
    """A struct whose ``messages`` is a list of messages as msgspec structs: one per ``$type`` of ``checked``
    (tagged), other keys allowed; ``tag_name`` is the name of the models' tag field. A struct, not ``list[...]``:
    msgspec keeps a struct's type information, but collects a generic alias's anew on every ``convert``.

    msgspec reads pydantic's ``StrictStr`` and ``StrictBool`` as its own (strict) ``str`` and ``bool``."""

    class Content(msgspec.Struct, tag_field="$type", kw_only=True):
        annotations: list[dict[str, Json]] | None = None
        additionalProperties: dict[str, Json] | None = None

    # pydantic reads a content's tag from this key too (the tag field's own name): one that holds it, whatever
    # the value, is left to pydantic (UNSET is the only value this type takes, and no JSON value is it)
    tag_field = (tag_name, msgspec.UnsetType, msgspec.UNSET)

    def kind(name: str, fields: dict[str, tuple[Any, Any]]) -> Any:
        own = [
            (field, annotation, msgspec.NODEFAULT if default is ... else default)
            for field, (annotation, default) in fields.items()
        ]
        return msgspec.defstruct(f"{name}Content", [tag_field, *own], bases=(Content,), tag=name, kw_only=True)

    kinds = [kind(name, fields) for name, fields in checked.items()]
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
    try:
        for message in converted:
            if message.createdAt is not None:
                datetime.fromisoformat(message.createdAt)
    except ValueError:
        return False
    return True
