"""Printing what the article prints, for notebooks and the demo."""

from __future__ import annotations

import json
from http import HTTPStatus

import httpx

_SHOWN_HEADERS = ("location", "etag", "retry-after", "www-authenticate", "content-type")


def print_response(response: httpx.Response) -> None:
    """One HTTP exchange as a reader wants to see it: request line, status, key headers, indented JSON."""
    request = response.request
    print(f"{request.method} {request.url.raw_path.decode()} -> {response.status_code} {HTTPStatus(response.status_code).phrase}")
    for name in _SHOWN_HEADERS:
        if name in response.headers:
            print(f"{name.title()}: {response.headers[name]}")
    if response.content:
        try:
            print(json.dumps(response.json(), ensure_ascii=False, indent=2))
        except ValueError:
            print(response.text)
