"""The codec's lossless carry: what one side lacks travels in the other's extra properties.

MAF-only fields go under ``additionalProperties["chatlab.maf"]`` in the JSON; MEAI-only fields (and keys the
converter would add but the original lacked, listed under ``"$absent"``) under ``additional_properties["chatlab.meai"]``
on the MAF side. :mod:`chatlab.client.codec` computes these diffs and overlays them when converting back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ChatHistoryCodecError

__all__ = [
    "MAF_EXTRA_KEY",
    "MEAI_EXTRA_KEY",
    "drop_empty_ap",
    "maf_diff",
    "meai_diff",
    "overlay_meai_extra",
    "split_extra",
    "with_ap_key",
]

MAF_EXTRA_KEY = "chatlab.maf"
"""Key in a JSON ``additionalProperties`` holding MAF fields MEAI has no place for."""
MEAI_EXTRA_KEY = "chatlab.meai"
"""Key in a MAF ``additional_properties`` holding MEAI fields MAF has no place for."""

_ABSENT = "$absent"  # inside MEAI_EXTRA_KEY: keys the raw encoder writes but the original JSON lacked


def maf_diff(target: Mapping[str, Any], back: Mapping[str, Any]) -> dict[str, Any]:
    """MAF fields (``to_dict`` form) of ``target`` that ``back`` does not reproduce."""
    extra = {k: v for k, v in target.items() if k not in back or back[k] != v}
    for k in back:
        if k not in target:  # absent from a to_dict means None (False for informational_only)
            extra[k] = False if k == "informational_only" else None
    return extra


def meai_diff(original: Mapping[str, Any], back: Mapping[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """JSON keys of ``original`` that ``back`` does not reproduce, and keys ``back`` adds."""
    extra: dict[str, Any] = {k: v for k, v in original.items() if k not in skip and (k not in back or back[k] != v)}
    absent = [k for k in back if k not in original and k not in skip]
    if absent:
        extra[_ABSENT] = absent
    return extra


def overlay_meai_extra(out: dict[str, Any], extra: Any) -> dict[str, Any]:
    if not isinstance(extra, Mapping):
        return out
    for k, v in extra.items():
        if k != _ABSENT:
            out[k] = v
    for k in extra.get(_ABSENT) or ():
        out.pop(k, None)
    return out


def split_extra(item: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``item`` without ``chatlab.maf`` (and without the ``additionalProperties`` it alone needed)."""
    j0 = dict(item)
    ap = j0.get("additionalProperties")
    if not isinstance(ap, Mapping) or MAF_EXTRA_KEY not in ap:
        return j0, None
    rest = {k: v for k, v in ap.items() if k != MAF_EXTRA_KEY}
    if rest:
        j0["additionalProperties"] = rest
    else:
        del j0["additionalProperties"]
    extra = ap[MAF_EXTRA_KEY]
    if not isinstance(extra, Mapping):
        raise ChatHistoryCodecError(f"additionalProperties[{MAF_EXTRA_KEY!r}] must be a JSON object")
    return j0, dict(extra)


def drop_empty_ap(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("additionalProperties") == {}:
        item = {k: v for k, v in item.items() if k != "additionalProperties"}
    return item


def with_ap_key(item: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = dict(item)
    out["additionalProperties"] = {**(out.get("additionalProperties") or {}), key: value}
    return out
