"""The public API: every exported name resolves, a user's type checker sees real types, and the arrows hold."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import chatlab
from tests.missing import skip_or_fail

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "chatlab"


def test_every_name_in_all_resolves() -> None:
    for name in chatlab.__all__:
        assert getattr(chatlab, name) is not None, name
    assert set(chatlab.__all__) == {*chatlab._LAZY, "__version__"}


def test_the_type_checking_imports_are_the_lazy_ones() -> None:
    """What mypy sees (the ``TYPE_CHECKING`` imports) is what ``import chatlab`` gives at run time."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = {
        alias.name: (node.module or "").lstrip(".")
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == chatlab._LAZY


def test_import_chatlab_is_light() -> None:
    code = "import sys, chatlab; print(sorted(m for m in sys.modules if m.startswith(('agent_framework', 'fastapi'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def test_the_package_is_marked_typed() -> None:
    assert (PACKAGE / "py.typed").is_file()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


USER_SCRIPT = '''
"""What a user writes: a service, a store, the provider and the tutorial helpers, under mypy --strict."""

import asyncio

import chatlab
from chatlab.service import ServiceSettings, create_app, start_service
from chatlab.stores import ChatHistoryStore, ConversationSummary, open_store


async def main() -> None:
    store: ChatHistoryStore = open_store("memory://")
    server = start_service(store=store, settings=ServiceSettings(max_messages=100))
    app = create_app(store, chatlab.ServiceSettings())
    print(app.title, chatlab.__version__)
    llm: chatlab.LLMConnection = await chatlab.connect_llm("offline")
    try:
        async with chatlab.RemoteChatHistoryProvider(server.url, retry=chatlab.RetryPolicy()) as provider:
            agent = chatlab.create_agent(llm.client, provider)
            session = await chatlab.create_or_resume_session(agent, provider, None)
            chatlab.print_agent_response(await agent.run("現在時刻を教えてください", session=session))
            chatlab.print_session_id("Session1", provider, session)
            chatlab.print_state_bag(session)
            await chatlab.print_external_store(provider)
            summaries: list[chatlab.ChatHistorySummary] = await provider.get_conversation_summaries()
            counts: list[int] = [s.message_count for s in summaries]
            print(counts, [s.message_count for s in await store.summaries()])
            first: ConversationSummary | None = next(iter(await store.summaries()), None)
            print(first)
        async with chatlab.AsyncChatHistoryClient(server.url) as http:
            await http.append("user-script", [{"role": "user", "contents": [{"$type": "text", "text": "hi"}]}])
            page: chatlab.MessagesPage = await http.read_after("user-script", 0, limit=10)
            print(len(page.messages), page.version)
        with chatlab.ChatHistoryClient(server.url) as sync_http:
            current: chatlab.Version = sync_http.head("user-script")
            try:
                sync_http.delete("user-script", if_match=chatlab.Version("other", 1))
            except chatlab.ChatHistoryServiceConflict as conflict:
                print(conflict, current.count)
        version = chatlab.Version.parse("abc.3")
        if version is not None:
            print(version.etag, version.count + 1)
    except chatlab.ChatlabError as exc:
        print(exc)
    finally:
        await llm.aclose()
        server.stop()


asyncio.run(main())
'''


MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent))


def _mypy_strict(script: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on a user's script, chatlab found as a user's mypy finds it (errors inside it are not the
    script's: ``mypy`` in .ci/run checks the package itself)."""
    (script.parent / "mypy.ini").write_text("[mypy]\nstrict = True\nfollow_imports = silent\n", encoding="utf-8")
    return subprocess.run(
        [str(MYPY), "--no-incremental", "--config-file", "mypy.ini", script.name],
        capture_output=True,
        text=True,
        cwd=script.parent,
        env={**os.environ, "MYPYPATH": str(ROOT)},  # an editable install is an import hook mypy cannot follow
    )


def test_a_user_script_passes_mypy_strict(tmp_path: Path) -> None:
    if MYPY is None:
        skip_or_fail("mypy is not installed: pip install -e '.[lint]'")
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(USER_SCRIPT), encoding="utf-8")
    result = _mypy_strict(script)
    assert result.returncode == 0, result.stdout + result.stderr
    ran = subprocess.run([sys.executable, script.name], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0 and "Messages Count: 4" in ran.stdout, ran.stdout + ran.stderr
    # the types are real, not Any: a wrong use is caught
    script.write_text("import chatlab\n\nx: int = chatlab.RemoteChatHistoryProvider\nchatlab.no_such_name\n")
    wrong = _mypy_strict(script)
    assert wrong.returncode == 1, wrong.stdout
    assert "Incompatible types in assignment" in wrong.stdout and "no_such_name" in wrong.stdout, wrong.stdout


def _imports(path: Path) -> set[str]:
    """The chatlab modules a source file imports (relative imports resolved)."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("chatlab")}


@pytest.mark.parametrize(
    ("side", "forbidden"),
    [
        ("service", ("chatlab.client", "chatlab.tutorial")),
        ("stores", ("chatlab.client", "chatlab.tutorial", "chatlab.service")),
        ("client", ("chatlab.service", "chatlab.stores", "chatlab.tutorial")),
        ("vocabulary.py", ("chatlab.client", "chatlab.service", "chatlab.stores", "chatlab.tutorial")),
    ],
)
def test_the_import_arrows_run_one_way(side: str, forbidden: tuple[str, ...]) -> None:
    """tutorial -> client -> vocabulary; service -> stores -> vocabulary; the service never imports the client."""
    path = PACKAGE / side
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    assert files
    wrong = {
        f"{file.relative_to(ROOT)} imports {name}"
        for file in files
        for name in _imports(file)
        if name.startswith(forbidden)
    }
    assert not wrong, sorted(wrong)


def _layout_entries() -> set[str]:
    """The files and folders the README's layout block names at its first level (``runner.py``, ``client/``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries = set()
    for line in block.splitlines()[2:]:  # after the fence's rest and the "chatlab/" line
        if line.startswith("  ") and not line.startswith("   "):
            entries.update(re.findall(r"(?:^|\s\s)([\w.]+(?:/|\.py))(?=\s|$)", line))  # a name after 2 spaces
    return entries


def test_the_readme_layout_names_every_part_of_the_package() -> None:
    """Each first-level module and folder of the package is in the README's layout, and each one it names exists."""
    named = _layout_entries()
    real = {f"{path.name}/" for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()} | {
        path.name for path in PACKAGE.glob("*.py") if path.name not in ("__init__.py", "__main__.py")
    }
    assert "client/" in named and "runner.py" in named  # the block was found and read
    assert named == real, {"in the README only": sorted(named - real), "missing from it": sorted(real - named)}


def test_the_stores_public_names_stay_where_they_were() -> None:
    """The split of the store modules kept every name importable from where it was before."""
    from chatlab.stores import postgres, redis, sqlite

    assert postgres.CHATLAB_PARAMETERS == ("schema",) and redis.CHATLAB_PARAMETERS == ("prefix", "buckets")
    assert postgres.split_url is redis.split_url
    assert callable(sqlite.path_from_url)
    assert redis.UNVERSIONED == "unversioned" and redis.DEFAULT_PREFIX == "chatlab:"
    for module in (postgres, sqlite):
        assert module.SCHEMA_VERSION == 5  # participants
    assert redis.SCHEMA_VERSION == redis.RedisChatHistoryStore.schema_version == 6  # participants
    assert postgres.PostgresChatHistoryStore.schema_version == 5
    assert sqlite.SqliteChatHistoryStore.schema_version == 5
