"""``python -m chatlab demo``: the article's output, twice, against one service (offline model)."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from chatlab.cli import build_parser, main
from chatlab.runner import BackgroundServer
from chatlab.service import create_app
from chatlab.tutorial.demo import ARTICLE_PAUSE, HistoryCheckFailed, run_demo

from .faults import lossy_gateway


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATLAB_LLM", "offline")
    monkeypatch.delenv("CHAT_HISTORY_SERVICE_URL", raising=False)


def store_listings(out: str) -> list[dict[str, int]]:
    """Each ``[External Store]`` block as {key: count}."""
    blocks = out.split("[External Store]\n")[1:]
    return [
        {m[1]: int(m[2]) for m in re.finditer(r"^External Store Key: (\w+), Messages Count: (\d+)$", b, re.M)}
        for b in blocks
    ]


def test_demo_prints_the_article_run_then_the_second_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--pause", "0"]) == 0
    out = capsys.readouterr().out
    first, second = out.split("===== チャット履歴管理サーバーを保持したまま2回目の実行")
    assert "offline tutorial model" in first and "chat history service started in the background" in first

    runs = [store_listings(first), store_listings(second)]
    keys1 = list(runs[0][-1])
    assert [sorted(b.values()) for b in runs[0]] == [[], [4], [8], [10], [4, 10]]
    assert runs[1][0] == runs[0][-1]  # the second run starts with the first run's keys still listed
    assert sorted(runs[1][-1].values()) == [4, 4, 10, 10] and set(keys1) < set(runs[1][-1])

    for run in (first, second):
        assert run.count("[Session] 新しいセッションを開始します。") == 1
        assert run.count("[ProvideChatHistoryAsync]") == 4 and run.count("[StoreChatHistoryAsync]") == 4
        assert re.search(r"^\[Session1\] SessionId: [0-9a-f]{32}$", run, re.M)
        assert "ResponseMessages Count: 3" in run and "ResponseMessages Count: 1" in run
        assert re.search(r"^現在の日時は \*\*[\d-]+ [\d:]+\*\* です。$", run, re.M)
        assert re.search(
            r"^最初に取得した時刻（.+）から、今回の取得時刻（.+）まで \*\*\d+ 秒\*\* が経過しています。$", run, re.M
        )
        states = re.findall(
            r"^stateBag Key: RemoteChatHistoryProvider, ValueKind: Object, "
            r'Value: \{"externalConversationKey":"([0-9a-f]{32})"\}$',
            run,
            re.M,
        )
        assert len(states) == 2 and run.count("stateBagCount:1") == 2


def test_demo_uses_a_running_service_when_told(capsys: pytest.CaptureFixture[str]) -> None:
    with BackgroundServer(create_app(), name="test-demo-service") as service:
        assert main(["demo", "--pause", "0", "--service-url", service.url]) == 0
    out = capsys.readouterr().out
    assert f"using the chat history service at {service.url}" in out


def test_demo_with_the_service_down_says_what_to_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("CHAT_HISTORY_SERVICE_URL", url)
    assert main(["demo", "--pause", "0"]) == 1
    err = capsys.readouterr().err
    assert url in err and "python -m chatlab serve" in err


def test_the_demo_waits_the_articles_10_s_unless_told_and_then_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["demo"]).pause == ARTICLE_PAUSE == 10
    assert main(["demo", "--pause", "0", "--runs", "1"]) == 0
    assert "[Wait] 0 s between the two time prompts (--pause), not the article's 10 s" in capsys.readouterr().out


def test_a_second_demo_against_a_kept_service_is_the_second_run(capsys: pytest.CaptureFixture[str]) -> None:
    with BackgroundServer(create_app(), name="test-demo-kept-service") as service:
        assert main(["demo", "--pause", "0", "--runs", "1", "--service-url", service.url]) == 0
        first = capsys.readouterr().out
        assert main(["demo", "--pause", "0", "--runs", "1", "--service-url", service.url]) == 0
        second = capsys.readouterr().out
    assert "===== 1回目の実行" in first and "保持したまま" not in first
    assert "1回目" not in second
    assert "===== チャット履歴管理サーバーを保持したまま2回目の実行" in second
    assert "the service already held 2 conversations" in second
    assert store_listings(second)[0] == store_listings(first)[-1]  # the first process's keys, still there


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ({"lose_appends": True}, "the history did not persist"),
        ({"forget_reads": True}, "the history did not load"),
    ],
)
def test_the_demo_fails_when_the_history_is_lost_on_the_wire(
    capsys: pytest.CaptureFixture[str], fault: dict[str, bool], problem: str
) -> None:
    with (
        BackgroundServer(create_app(), name="test-demo-upstream") as upstream,
        BackgroundServer(lossy_gateway(upstream.url, **fault), name="test-demo-lossy-gateway") as gateway,
    ):
        assert main(["demo", "--pause", "0", "--runs", "1", "--service-url", gateway.url]) == 1
    captured = capsys.readouterr()
    assert problem in captured.err and "Session1" in captured.err
    assert "[Session1]\nstateBagCount" not in captured.out  # it stopped at the broken run


@pytest.mark.anyio
async def test_run_demo_raises_history_check_failed_when_appends_are_answered_but_not_sent() -> None:
    """The same through the API, with the loss inside the provider's own HTTP client (a mock transport)."""
    with BackgroundServer(create_app(), name="test-demo-upstream") as upstream:
        real = httpx.AsyncHTTPTransport()

        async def handler(request: httpx.Request) -> httpx.Response:
            if request.method == "POST":
                return httpx.Response(202, headers={"Location": request.url.path})
            return await real.handle_async_request(request)

        client = httpx.AsyncClient(base_url=upstream.url, transport=httpx.MockTransport(handler))
        try:
            with pytest.raises(HistoryCheckFailed, match="did not persist"):
                await run_demo(pause=0, service_url=upstream.url, runs=1, http_client=client)
        finally:
            await client.aclose()
            await real.aclose()
