"""What a test does when something outside Python it needs (a database, a browser) is missing."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def skip_or_fail(message: str) -> NoReturn:
    """Skip with ``message`` (what is missing and how to get it); fail instead under CI, which must run everything."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run this test: {message}")
    pytest.skip(message)


def require_module(name: str, extra: str) -> None:
    """Import ``name`` or skip (fail under CI) saying which extra installs it."""
    try:
        __import__(name)
    except ImportError:
        skip_or_fail(f"{name} is not installed: pip install -e '.[{extra}]'")
