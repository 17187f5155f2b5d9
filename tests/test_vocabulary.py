"""The shared vocabulary: one content kinds table that the codec, the schema, the display and the window read."""

from __future__ import annotations

from typing import get_args, get_type_hints

import pytest
from agent_framework import Content, Message

from chatlab.client.codec import content_from_meai, content_to_meai
from chatlab.client.window import window_messages
from chatlab.service.schema import CONTENT_TYPES
from chatlab.tutorial.display import print_messages
from chatlab.vocabulary import CONTENT_KINDS, Version, kind_of_maf, link_of


def test_the_table_names_each_kind_once_and_only_real_maf_types() -> None:
    content_types = get_type_hints(Content.__init__)["type"]  # the public constructor's Literal of every type
    maf = [k.maf for k in CONTENT_KINDS if k.maf is not None]
    meai = [k.meai for k in CONTENT_KINDS if k.meai is not None]
    assert len(maf) == len(set(maf)) and len(meai) == len(set(meai))
    assert set(maf) == set(get_args(content_types)), "a MAF content type is missing from (or unknown to) the table"


def test_the_service_accepts_every_meai_kind_of_the_table() -> None:
    assert tuple(k.meai for k in CONTENT_KINDS if k.meai is not None) == CONTENT_TYPES


@pytest.mark.parametrize("kind", [k for k in CONTENT_KINDS if k.maf and k.meai], ids=lambda k: k.meai)
def test_the_codec_converts_the_kinds_the_table_pairs(kind) -> None:
    assert content_to_meai(Content(kind.maf))["$type"] == kind.meai
    assert content_from_meai({"$type": kind.meai}).type == kind.maf


def test_a_kind_only_maf_has_crosses_as_text_and_comes_back() -> None:
    content = Content("oauth_consent_request")
    assert kind_of_maf("oauth_consent_request").meai is None
    assert content_to_meai(content)["$type"] == "text"
    assert content_from_meai(content_to_meai(content)).type == "oauth_consent_request"


def test_the_display_prints_the_csharp_name(capsys: pytest.CaptureFixture[str]) -> None:
    print_messages([Message("assistant", [Content("function_call", call_id="c", name="f"), Content("usage")])])
    assert capsys.readouterr().out == "Role: assistant, Contents: FunctionCallContent, UsageContent\n"


def test_calls_and_results_come_from_the_table_and_newer_types_by_name() -> None:
    assert link_of("function_call") == ("call", "call_id")
    assert link_of("function_approval_response") == ("result", "id")
    assert link_of("oauth_consent_request") is None
    assert link_of("some_future_tool_result") == ("result", "call_id")
    approval = Message("assistant", [Content("function_approval_request", id="a1")])
    answer = Message("user", [Content("function_approval_response", id="a1")])
    assert window_messages([approval, answer], max_messages=1) == []  # never the answer without its request


@pytest.mark.parametrize(("text", "version"), [("0", Version(None, 0)), ("ab12.3", Version("ab12", 3))])
def test_versions_read_and_write_one_format(text: str, version: Version) -> None:
    assert Version.parse(text) == version and str(version) == text
    assert Version.from_etag(version.etag) == version
