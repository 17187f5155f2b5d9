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
