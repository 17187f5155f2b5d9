"""The one key rule and the one metadata rule, as every entry point meets them: a final newline is not let through
(a whole match, never ``$``), C1 controls such as U+0085 are refused in titles and tag values as in keys, and an
import line is checked by the same rule as a ``PATCH`` (tests/stores/test_store_rules_http.py has the HTTP side)."""

from __future__ import annotations

import pytest

from chatlab.operations.lines import BadLine, parse_conversation
from chatlab.service.keys import KeyRule
from chatlab.service.settings import ServiceSettings
from chatlab.stores.metadata import MetadataChange, MetadataError
from chatlab.vocabulary import Refused

BAD_METADATA = [
    ({"title": "title\n"}, "control"),
    ({"title": "a\u0085b"}, "control"),
    ({"title": "a\ud800b"}, "surrogate"),
    ({"tags": {"name\n": "x"}}, "tag name"),
    ({"tags": {"n": "a\u0085b"}}, "control"),
]


@pytest.mark.parametrize(("change", "says"), BAD_METADATA)
def test_the_metadata_rule_refuses_what_no_entry_point_may_store(change: dict, says: str) -> None:
    with pytest.raises(MetadataError, match=says):
        MetadataChange.setting(change.get("title"), change.get("tags"))


@pytest.mark.parametrize(("change", "says"), BAD_METADATA[:2] + BAD_METADATA[3:])
def test_an_import_line_meets_the_same_rule(change: dict, says: str) -> None:
    import json

    line = json.dumps({"conversationKey": "k", **change, "messages": []}).encode()
    with pytest.raises(BadLine, match=says):
        parse_conversation(line, 1)


def test_the_key_rule_is_one_whole_match_with_one_engine() -> None:
    words = KeyRule(ServiceSettings(key_pattern=r"^\w+$"))
    assert [words.fits(key) for key in ("a1", "a²", "b_c")] == [True, True, True]
    assert not words.fits("a\n") and not words.fits("a\u0085") and not words.fits("")
    with pytest.raises(Refused, match="query parameter after"):
        words.check("a b", what="query parameter after")
    short = KeyRule(ServiceSettings(key_max_length=16))
    assert short.fits("k" * 16) and not short.fits("k" * 17)
