"""What the service allows (docs/protections.md): a field of :class:`ServiceSettings` is the whole declaration of its
setting: type, default, environment variable (``CHATLAB_`` + its name in capitals), ``serve`` flag (:func:`add_flags`)
and docs row (:func:`settings_table`). Every protection is off by default: the article's plain requests work unchanged.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, NewType

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .security.auth import ApiKeys
from .security.ratelimit import RateLimit

ENV_PREFIX = "CHATLAB_"
KEY_PATTERN = r"^[A-Za-z0-9_-]+$"
KEY_MAX_LENGTH = 128


@dataclass(frozen=True, slots=True)
class Flag:
    """How a setting shows on ``serve``: ``--`` and the field's name (a tuple's in the singular, given once per item)
    in flag ``group`` (``None``: no flag), with ``metavar`` and its ``default`` as people say it."""

    group: str | None = "limits"
    metavar: str | None = None
    default: str | None = None


Seconds = NewType("Seconds", float)
"""A duration in seconds; given as text (``30d``), it is parsed (:func:`parse_duration`)."""
_YES_NO = ("1", "true", "yes", "on", "0", "false", "no", "off")


class ServiceSettings(BaseSettings):
    """What the service allows; a field not given comes from its ``CHATLAB_*`` variable, else its default. ``api_keys``
    also takes a mapping key -> namespace or ``NAMESPACE:KEY`` text, ``rate_limit`` a spec like ``"10/s"``. A bad value
    raises ``ValueError`` (a pydantic ``ValidationError``) naming the setting."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="forbid", arbitrary_types_allowed=True
    )

    max_body_bytes: Annotated[
        int, Field(ge=1, description="largest request body, in bytes; `413` over it"), Flag(default="8 MiB")
    ] = 8 * 1024 * 1024
    max_messages: Annotated[int, Field(ge=1, description="most messages per request; `413` over it")] = 10_000
    max_message_bytes: Annotated[
        int | None,
        Field(ge=1, description="largest message as compact JSON, in bytes; `413` naming the message"),
    ] = None
    key_pattern: Annotated[
        str,
        Field(description="regular expression a conversation key must match; `400` otherwise"),
        Flag(metavar="REGEX"),
    ] = KEY_PATTERN
    key_max_length: Annotated[int, Field(ge=1, description="longest conversation key; `400` over it")] = KEY_MAX_LENGTH
    rate_burst: Annotated[
        int | None,
        Field(ge=1, description="requests allowed at once under the rate limit"),
        Flag(metavar="N", default="N of the rate limit"),
    ] = None
    rate_limit: Annotated[
        RateLimit | None,
        NoDecode,
        Field(
            validate_default=True,
            description="requests per API key (or client without keys): N/s, N/min or N/h; `429` + `Retry-After` "
            "over it",
        ),
        Flag(metavar="N/PERIOD"),
    ] = None
    idempotency_ttl: Annotated[
        float,
        Field(
            gt=0,
            description="seconds an `Idempotency-Key` is remembered (a retry with it is answered as the first time)",
        ),
        Flag(metavar="SECONDS", default="86400 (a day)"),
    ] = 86_400.0
    api_keys_file: Annotated[
        Path | None,
        Field(
            description="a file of `NAMESPACE:KEY` lines; requests then need `Authorization: Bearer KEY` "
            "(`401` + `WWW-Authenticate` without a valid key)"
        ),
        Flag(group="access", metavar="PATH"),
    ] = None
    api_keys: Annotated[
        ApiKeys | None,
        NoDecode,
        Field(
            repr=False,
            validate_default=True,
            description="`NAMESPACE:KEY` entries, comma- or newline-separated (added to the file's); "
            "not a flag: a command line shows in `ps`",
        ),
        Flag(group=None),
    ] = None
    cors_origins: Annotated[
        tuple[str, ...],
        NoDecode,
        Field(
            description="allow browser calls from these origins (preflight `200` for a listed origin, `400` "
            "otherwise; the variable: comma-separated)"
        ),
        Flag(group="access", metavar="ORIGIN"),
    ] = ()
    tls_cert: Annotated[
        Path | None,
        Field(description="serve HTTPS with this certificate chain (PEM; with `tls_key`)"),
        Flag(group="access", metavar="PEM"),
    ] = None
    tls_key: Annotated[
        Path | None,
        Field(description="the certificate's private key (PEM; with `tls_cert`)"),
        Flag(group="access", metavar="PEM"),
    ] = None

    allowed_hosts: Annotated[
        tuple[str, ...],
        NoDecode,
        Field(
            description="answer requests whose `Host` is this name too (`*`: any), besides `localhost`, `127.0.0.1`, "
            "`[::1]`, the bound host and the address connected to; `421` for another (the variable: comma-separated)"
        ),
        Flag(group="access", metavar="NAME", default="loopback names"),
    ] = ()
    store_timeout: Annotated[
        float,
        Field(
            gt=0,
            description="seconds a store operation may take, the wait for a connection or a lock included; "
            "`503` + `Retry-After` after it",
        ),
        Flag(group="bounds", metavar="SECONDS", default="5"),
    ] = 5.0
    keep_alive_timeout: Annotated[
        float,
        Field(gt=0, description="seconds an idle keep-alive connection stays open"),
        Flag(group="bounds", metavar="SECONDS", default="5"),
    ] = 5.0
    body_timeout: Annotated[
        float,
        Field(gt=0, description="seconds for a write's whole body to arrive; `408` + `Connection: close` after it"),
        Flag(group="bounds", metavar="SECONDS", default="30"),
    ] = 30.0
    max_connections: Annotated[
        int,
        Field(
            ge=1,
            description="open connections served (idle ones and requests in progress included); a request on a "
            "connection over it gets `503`",
        ),
        Flag(group="bounds", default="500"),
    ] = 500

    viewer: Annotated[
        bool,
        Field(description="serve the read-only conversation viewer at `/ui` (docs/viewer.md)"),
        Flag(group="access", default="on; `serve` beyond loopback: off unless asked"),
    ] = True
    api_docs: Annotated[
        bool,
        Field(
            description="serve Swagger UI at `/docs` and ReDoc at `/redoc` (they load their scripts from a CDN, so "
            "they need the internet; `/openapi.json` is always served)"
        ),
        Flag(group="access", default="off"),
    ] = False
    access_log: Annotated[
        bool,
        Field(description="log a line per request (`uvicorn.access`); off: quiet, and faster"),
        Flag(group="server", default="off"),
    ] = False

    retention: Annotated[
        Seconds | None,
        Field(
            gt=0,
            description="delete a conversation not written for this long: `30d`, `12h`, `90m`, `2w` (or seconds); "
            "each store its own way (docs/stores.md)",
        ),
        Flag(group="operations", metavar="DURATION", default="none: keep everything"),
    ] = None
    metrics: Annotated[
        bool,
        Field(description="serve Prometheus metrics at `/metrics` (docs/operations.md)"),
        Flag(group="operations", default="off"),
    ] = False

    @field_validator("key_pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"the conversation key pattern {pattern!r} is not a regular expression: {exc}") from None
        return pattern

    @field_validator("viewer", "metrics", "access_log", "api_docs", mode="before")
    @classmethod
    def _yes_no(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and value.strip().lower() not in _YES_NO:
            choices = "use 1 or 0 (true/false, yes/no, on/off)"
            raise ValueError(f"{_env(str(info.field_name))}={value!r} is not a yes/no value: {choices}")
        return value

    @field_validator("retention", "rate_limit", mode="before")
    @classmethod
    def _parse_text(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        return RateLimit.parse(value) if info.field_name == "rate_limit" else parse_duration(value, what="retention")

    @field_validator("rate_limit")
    @classmethod
    def _with_burst(cls, limit: RateLimit | None, info: ValidationInfo) -> RateLimit | None:
        burst = info.data.get("rate_burst")
        if burst is None:
            return limit
        if limit is None:
            raise ValueError("missing, yet a rate burst (--rate-burst, CHATLAB_RATE_BURST) is given")
        return replace(limit, burst=burst)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_keys(cls, value: Any) -> Any:
        if isinstance(value, str):
            return ApiKeys.parse(value) if value.strip() else None
        if isinstance(value, Mapping):
            return ApiKeys(value)
        return value

    @field_validator("api_keys")
    @classmethod
    def _with_file(cls, keys: ApiKeys | None, info: ValidationInfo) -> ApiKeys | None:
        path = info.data.get("api_keys_file")
        if path is None:
            return keys
        from_file = ApiKeys.from_file(path)
        return from_file if keys is None else ApiKeys.combine(keys, from_file)

    @field_validator("cors_origins", "allowed_hosts", mode="before")
    @classmethod
    def _split_origins(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(origin for origin in re.split(r"[,\s]+", value) if origin)
        return tuple(value) if isinstance(value, Iterable) else value

    @model_validator(mode="after")
    def _tls_pair(self) -> ServiceSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key (CHATLAB_TLS_CERT, CHATLAB_TLS_KEY): PEM files")
        return self


# --------------------------------------------------------------------------- the flags and the docs, from the fields


def _flag_of(info: FieldInfo) -> Flag:
    return next((m for m in info.metadata if isinstance(m, Flag)), Flag())


def _env(name: str) -> str:
    return ENV_PREFIX + name.upper()


def _repeated(info: FieldInfo) -> bool:
    return info.annotation == tuple[str, ...]


def _flag_name(name: str, info: FieldInfo) -> str:
    flag = "--" + name.replace("_", "-")
    return flag.removesuffix("s") if _repeated(info) else flag


def _default_text(info: FieldInfo, flag: Flag) -> str:
    return flag.default or ("none" if info.default in (None, ()) else f"`{info.default}`")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (``--max-body-bytes``, ...), with the field's description as its help."""
    groups: dict[str, Any] = {}
    for name, info in ServiceSettings.model_fields.items():
        flag = _flag_of(info)
        if flag.group is None:
            continue
        group = groups.get(flag.group) or groups.setdefault(flag.group, parser.add_argument_group(flag.group))
        help_text = f"{info.description} (default {_default_text(info, flag)}; {_env(name)})".replace("`", "")
        options: dict[str, Any] = {"action": argparse.BooleanOptionalAction}  # --name / --no-name
        if info.annotation is not bool:
            kind = next((t for t in (int, float) if info.annotation in (t, t | None)), str)  # str: the field parses it
            options = {"type": kind, "metavar": flag.metavar, "action": "append" if _repeated(info) else "store"}
        group.add_argument(_flag_name(name, info), dest=name, help=help_text.replace("%", "%%"), **options)


def settings_from_flags(args: argparse.Namespace, defaults: Mapping[str, Any] | None = None) -> ServiceSettings:
    """The settings: a flag given wins over its variable; ``defaults`` replace fields' own when neither is given."""
    given = {name: getattr(args, name, None) for name in ServiceSettings.model_fields}
    for name, value in (defaults or {}).items():
        if given.get(name) is None and not os.environ.get(_env(name), "").strip():
            given[name] = value
    return ServiceSettings(**{name: value for name, value in given.items() if value is not None})


def describe_error(error: ValidationError) -> str:
    """A ``ValidationError`` as people read it: one ``setting (--flag, VARIABLE): what is wrong`` per problem."""
    lines = []
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        info = ServiceSettings.model_fields.get(name)
        where = f"{name} ({_flag_name(name, info)}, {_env(name)}): " if info is not None else ""
        lines.append(where + str(item["msg"]).removeprefix("Value error, "))
    return "; ".join(lines)


def settings_table() -> str:
    """The Markdown table of every setting that docs/protections.md holds (a test checks it is current)."""
    rows = ["| `ServiceSettings` | environment | `serve` flag | default | what |", "|---|---|---|---|---|"]
    for name, info in ServiceSettings.model_fields.items():
        flag = _flag_of(info)
        option = "" if flag.group is None else f"`{_flag_name(name, info)} {flag.metavar or 'N'}`"
        if info.annotation is bool:
            option = f"`{_flag_name(name, info)}`, `--no-{name.replace('_', '-')}`"
        if _repeated(info):
            option += " (repeat)"
        description = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | `{_env(name)}` | {option} | {_default_text(info, flag)} | {description} |")
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- durations as people write them

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str, *, what: str = "duration") -> float:
    """Seconds in ``text``: a positive number and one unit of s, m, h, d or w (``30d``: thirty days)."""
    match = _DURATION.match(text.lower())
    seconds = float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(
            f"invalid {what} {text!r}: write a positive number and a unit, s, m, h, d or w (for example 30d or 12h)"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """The largest whole unit that says ``seconds`` exactly (``2592000`` -> ``30d``)."""
    for unit in "wdhm":
        if seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"
