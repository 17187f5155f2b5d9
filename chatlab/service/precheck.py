"""A quick check that a body's messages are certainly valid, so the common body skips pydantic's slower models: msgspec
structs built from the schema's table of checked fields (:mod:`.schema`), so what they accept the models accept;
anything else goes to pydantic, which decides and words the refusal."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Union

import msgspec

Json = Any


def structs(checked: dict[str, dict[str, tuple[Any, Any]]], tag_name: str) -> Any:
    """A struct whose ``messages`` is a list of messages, their contents tagged by ``$type`` (one struct per type of
    ``checked``, other keys allowed; ``tag_name``: the models' tag field). A struct, not ``list[...]``: msgspec keeps a
    struct's type information, but collects a generic alias's anew on every ``convert``."""

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
    """Whether ``messages`` are certainly valid as ``checked_type`` (of :func:`structs`); else pydantic decides."""
    try:
        for message in msgspec.convert({"messages": messages}, checked_type).messages:
            if message.createdAt is not None:
                datetime.fromisoformat(message.createdAt)
    except ValueError:  # msgspec.ValidationError is one
        return False
    return True
