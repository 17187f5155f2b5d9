"""One declaration per setting: the fields of ``ServiceSettings`` give the variables, the flags and the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatlab.cli import build_parser
from chatlab.service import ServiceSettings
from chatlab.service.settings import settings_from_flags, settings_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "protections.md"


def serve_flags() -> dict[str, str]:
    """``serve``'s flags -> the field each one sets."""
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]  # argparse keeps subcommands private
    return {option: action.dest for action in serve._actions for option in action.option_strings}


def test_the_docs_table_is_generated_from_the_fields() -> None:
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"<!-- settings: begin -->\n(.*?)<!-- settings: end -->", text, re.S)
    assert block is not None, "docs/protections.md lost its settings table markers"
    assert block.group(1) == settings_table(), "regenerate the table: see docs/protections.md, 'Every option'"
    for name in ServiceSettings.model_fields:
        assert f"`CHATLAB_{name.upper()}`" in block.group(1)


def test_every_flag_of_before_still_sets_its_field() -> None:
    flags = serve_flags()
    expected = {
        "--max-body-bytes": "max_body_bytes",
        "--max-messages": "max_messages",
        "--max-message-bytes": "max_message_bytes",
        "--key-pattern": "key_pattern",
        "--key-max-length": "key_max_length",
        "--rate-limit": "rate_limit",
        "--rate-burst": "rate_burst",
        "--idempotency-ttl": "idempotency_ttl",
        "--api-keys-file": "api_keys_file",
        "--cors-origin": "cors_origins",
        "--tls-cert": "tls_cert",
        "--tls-key": "tls_key",
    }
    assert {flag: flags.get(flag) for flag in expected} == expected
    assert {"--host", "--port", "--store", "--log-level"} <= set(flags)


def test_a_flag_wins_over_its_variable_and_the_rest_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice:alice-0123456789abcdef\n")
    monkeypatch.setenv("CHATLAB_MAX_MESSAGES", "7")
    monkeypatch.setenv("CHATLAB_MAX_BODY_BYTES", "5000")
    monkeypatch.setenv("CHATLAB_API_KEYS", "bob:bob-0123456789abcdef")
    monkeypatch.setenv("CHATLAB_RATE_BURST", "5")
    origins = ["--cors-origin", "https://a.example", "--cors-origin", "https://b.example"]
    argv = ["serve", "--max-messages", "3", *origins, "--api-keys-file", str(keys), "--rate-limit", "60/min"]
    args = build_parser().parse_args(argv)
    settings = settings_from_flags(args)
    assert (settings.max_messages, settings.max_body_bytes) == (3, 5000)
    assert settings.cors_origins == ("https://a.example", "https://b.example")
    assert settings.api_keys is not None and settings.api_keys.namespaces == ["alice", "bob"]
    assert settings.rate_limit is not None and (settings.rate_limit.rate, settings.rate_limit.burst) == (1.0, 5)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate-burst", "3"], "rate_limit (--rate-limit, CHATLAB_RATE_LIMIT): missing, yet a rate burst"),
        (["--max-body-bytes", "0"], "max_body_bytes (--max-body-bytes, CHATLAB_MAX_BODY_BYTES): "),
        (["--tls-cert", "cert.pem"], "TLS needs both --tls-cert and --tls-key"),
        (["--key-pattern", "["], "key_pattern (--key-pattern, CHATLAB_KEY_PATTERN): the conversation key pattern"),
    ],
)
def test_a_bad_setting_is_refused_naming_its_flag_and_variable(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatlab.cli import main

    assert main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_variable_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATLAB_MAX_MESSAGES", "lots")
    with pytest.raises(ValueError, match="max_messages"):
        ServiceSettings()


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="max_body"):
        ServiceSettings(max_body=1)  # type: ignore[call-arg]  # the misspelling is the point
