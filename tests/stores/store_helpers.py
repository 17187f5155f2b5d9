"""Helpers shared by the store tests: messages that say which batch they belong to."""

from __future__ import annotations

import json
from collections.abc import Sequence


def batch(writer: int, number: int, size: int) -> list[bytes]:
    """``size`` compact JSON messages, each naming its writer, batch number, index and batch size."""
    return [
        json.dumps(
            {"role": "user", "contents": [{"$type": "text", "text": f"w{writer} b{number} {i}/{size}"}]},
            separators=(",", ":"),
        ).encode()
        for i in range(size)
    ]


def check_batches(messages: Sequence[bytes], expected: dict[tuple[int, int], int]) -> None:
    """Every expected batch (writer, number) -> size is present once, whole, contiguous and in order."""
    seen: dict[tuple[int, int], int] = {}
    i = 0
    while i < len(messages):
        text = json.loads(messages[i])["contents"][0]["text"]
        w, b, pos = text.split(" ")
        index, size = map(int, pos.split("/"))
        key = (int(w[1:]), int(b[1:]))
        assert index == 0, f"message {i} starts in the middle of batch {key}: {text}"
        assert key not in seen, f"batch {key} appears twice"
        run = messages[i : i + size]
        assert run == batch(key[0], key[1], size), f"batch {key} at {i} is interleaved or partial"
        seen[key] = size
        i += size
    assert seen == expected, f"missing batches: {sorted(set(expected) - set(seen))}"
