"""What the service allows, each default read from the environment (docs/protections.md).

The article's plain requests work unchanged. What it leaves out is here as options of
:class:`ServiceSettings`, all off by default: API keys scoped to namespaces, CORS, limits,
a rate limit. ``ETag``/``If-Match`` versions and ``Idempotency-Key`` retries need no option:
they are always on, since a client that does not use them sees no difference.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .security.auth import ApiKeys
from .security.ratelimit import RateLimit

KEY_PATTERN = r"^[A-Za-z0-9_-]+$"
KEY_MAX_LENGTH = 128


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a whole number") from None


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={value!r} is not a yes/no value: use 1 or 0 (true/false, yes/no, on/off)")


def _env_rate_limit() -> RateLimit | None:
    spec = os.environ.get("CHATLAB_RATE_LIMIT", "").strip()
    return RateLimit.parse(spec, _env_int("CHATLAB_RATE_BURST", None)) if spec else None


def _env_origins() -> tuple[str, ...]:
    return tuple(o for o in re.split(r"[,\s]+", os.environ.get("CHATLAB_CORS_ORIGINS", "")) if o)


@dataclass(frozen=True)
class ServiceSettings:
    """What the service allows; each default comes from the environment (docs/protections.md).

    ============================  ===========================  ====================================
    setting                       environment variable         default
    ============================  ===========================  ====================================
    ``max_body_bytes``            ``CHATLAB_MAX_BODY_BYTES``   8 MiB (413 over it)
    ``max_messages``              ``CHATLAB_MAX_MESSAGES``     10,000 per request (413 over it)
    ``max_message_bytes``         ``CHATLAB_MAX_MESSAGE_BYTES`` none (413 over it)
    ``key_pattern``               ``CHATLAB_KEY_PATTERN``      ``^[A-Za-z0-9_-]+$`` (400 otherwise)
    ``key_max_length``            ``CHATLAB_KEY_MAX_LENGTH``   128 (400 over it)
    ``api_keys``                  ``CHATLAB_API_KEYS``,        none: no authentication (401 without
                                  ``CHATLAB_API_KEYS_FILE``    a valid key when given)
    ``cors_origins``              ``CHATLAB_CORS_ORIGINS``     none: no CORS headers
    ``rate_limit``                ``CHATLAB_RATE_LIMIT``,      none (429 + Retry-After when given)
                                  ``CHATLAB_RATE_BURST``
    ``idempotency_ttl``           ``CHATLAB_IDEMPOTENCY_TTL``  86,400 s: how long a POST's
                                                               ``Idempotency-Key`` is remembered
    ``viewer``                    ``CHATLAB_VIEWER``           on: the read-only conversation viewer
                                                               at ``/ui`` (docs/viewer.md); ``serve``
                                                               turns it off beyond loopback unless asked
    ============================  ===========================  ====================================

    ``api_keys`` takes an :class:`~chatlab.service.security.ApiKeys` or a mapping key -> namespace;
    ``rate_limit`` a :class:`~chatlab.service.security.RateLimit` or a spec like ``"10/s"``.
    """

    max_body_bytes: int = field(default_factory=lambda: _env_int("CHATLAB_MAX_BODY_BYTES", 8 * 1024 * 1024))
    max_messages: int = field(default_factory=lambda: _env_int("CHATLAB_MAX_MESSAGES", 10_000))
    max_message_bytes: int | None = field(default_factory=lambda: _env_int("CHATLAB_MAX_MESSAGE_BYTES", None))
    key_pattern: str = field(default_factory=lambda: os.environ.get("CHATLAB_KEY_PATTERN") or KEY_PATTERN)
    key_max_length: int = field(default_factory=lambda: _env_int("CHATLAB_KEY_MAX_LENGTH", KEY_MAX_LENGTH))
    api_keys: ApiKeys | Mapping[str, str] | None = field(default_factory=ApiKeys.from_env, repr=False)
    cors_origins: tuple[str, ...] = field(default_factory=_env_origins)
    rate_limit: RateLimit | str | None = field(default_factory=_env_rate_limit)
    idempotency_ttl: float = field(default_factory=lambda: float(os.environ.get("CHATLAB_IDEMPOTENCY_TTL") or 86_400))
    viewer: bool = field(default_factory=lambda: _env_flag("CHATLAB_VIEWER", True))

    def __post_init__(self) -> None:
        self._check()
        self._normalise()

    def _check(self) -> None:
        """Refuse a setting the service could not honour, before it serves anything."""
        for name in ("max_body_bytes", "max_messages", "key_max_length"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, not {getattr(self, name)!r}")
        if self.max_message_bytes is not None and self.max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be at least 1, not {self.max_message_bytes!r}")
        if not self.idempotency_ttl > 0:
            raise ValueError(f"idempotency_ttl must be a positive number of seconds, not {self.idempotency_ttl!r}")
        try:
            re.compile(self.key_pattern)
        except re.error as exc:
            raise ValueError(
                f"the conversation key pattern {self.key_pattern!r} is not a regular expression: {exc}"
            ) from None

    def _normalise(self) -> None:
        """Turn the convenient forms (a mapping of keys, a rate spec, any iterable of origins) into the real ones."""
        if self.api_keys is not None and not isinstance(self.api_keys, ApiKeys):
            object.__setattr__(self, "api_keys", ApiKeys(self.api_keys))
        if isinstance(self.rate_limit, str):
            object.__setattr__(self, "rate_limit", RateLimit.parse(self.rate_limit))
        object.__setattr__(self, "cors_origins", tuple(self.cors_origins))
