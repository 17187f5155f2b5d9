"""environment.yml and pyproject.toml install what the tutorial needs, and a user's script type-checks against it."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import yaml

from tests.missing import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {
    "jupyterlab",
    "ipykernel",
    "httpx",
    "openai",
    "fastapi",
    "uvicorn",
    "nbval",
    "pytest",
    "agent-framework-core",
    "agent-framework-openai",
}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_environment_yml_is_valid_and_installs_chatlab_with_notebook_and_test_extras() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["name"] == "chatlab"
    deps = env["dependencies"]
    python = next(d for d in deps if isinstance(d, str) and d.startswith("python"))
    assert ">=3.11" in python
    assert "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ["--editable .[notebooks,dev]"]


def test_pyproject_declares_every_required_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _names(project["dependencies"])
    for extra in ("notebooks", "dev"):
        declared |= _names(project["optional-dependencies"][extra])
    assert declared >= REQUIRED, REQUIRED - declared
    assert project["requires-python"] == ">=3.11"


def _installed_by(requirements: list[str], extras: set[str]) -> set[str]:
    """The distributions these requirements install, with their dependencies (read from the installed metadata)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [(Requirement(r), extras) for r in requirements]
    while todo:
        requirement, active = todo.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in active | {""}):
            continue
        name = requirement.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        todo += [(Requirement(r), set(requirement.extras)) for r in requires]
    return seen


def test_the_notebooks_extra_installs_everything_the_notebooks_import() -> None:
    """The README's quickstart (`pip install -e '.[notebooks]'`) runs every notebook: no missing module."""
    import ast
    import sys
    from importlib.metadata import packages_distributions

    import nbformat

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    notebooks_extra = [r for r in project["optional-dependencies"]["notebooks"] if not r.startswith("chatlab")]
    installed = _installed_by(project["dependencies"] + notebooks_extra, set())
    providers = {m: {d.lower().replace("_", "-") for d in dists} for m, dists in packages_distributions().items()}
    missing: dict[str, str] = {}
    # the notebooks' own modules: the provider notebook 2 writes, the exercises' reference solutions
    local = {p.stem for p in (ROOT / "notebooks").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    sources = [
        (p, cell.source)
        for p in sorted((ROOT / "notebooks").glob("*.ipynb"))
        for cell in nbformat.read(p, as_version=4).cells
        if cell.cell_type == "code"
    ]
    sources += [(p, p.read_text()) for p in sorted((ROOT / "notebooks").rglob("*.py"))]
    for path, source in sources:
        if source.startswith("%%writefile"):  # what it writes is notebooks/remote_provider.py, read below
            continue
        for node in ast.walk(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for top in {n.split(".")[0] for n in names} - {"chatlab"} - local - set(sys.stdlib_module_names):
                if not providers.get(top, set()) & installed:
                    missing[top] = path.name
    assert not missing, f"imported by the notebooks but not installed by chatlab[notebooks]: {missing}"


USER_SCRIPT = """\
import asyncio

from chatlab import ChatHistoryClient, RemoteChatHistoryProvider, open_store


async def main() -> None:
    store = open_store("memory://")
    await store.append("k", [b'{"role":"user","contents":[]}'])
    provider = RemoteChatHistoryProvider("http://127.0.0.1:5000")
    await provider.aclose()
    client: ChatHistoryClient = ChatHistoryClient("http://127.0.0.1:5000")
    client.close()


asyncio.run(main())
"""


def test_a_users_script_in_another_folder_type_checks_against_the_installed_chatlab(tmp_path: Path) -> None:
    """After the README's install (``pip install -e .``) mypy --strict finds chatlab from any folder.

    An editable install that works by an import hook (setuptools' default) is invisible to type
    checkers; the build backend's path entry is what mypy reads. Run where this clone is the
    installed chatlab (as .ci/run installs it); elsewhere there is nothing of this clone to check."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    locate = "import chatlab, pathlib; print(pathlib.Path(chatlab.__file__).parent.parent.resolve())"
    where = subprocess.run(
        [sys.executable, "-c", locate],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    if where.returncode != 0 or Path(where.stdout.strip()) != ROOT:
        skip_or_fail(f"this clone is not the chatlab installed in {sys.prefix} (run `pip install -e .` here)")
    (tmp_path / "script.py").write_text(USER_SCRIPT)
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "script.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert checked.returncode == 0, (
        f"{checked.stdout}{checked.stderr}\n(an editable install by import hook hides chatlab from type checkers: "
        "reinstall with the README's `pip install -e .`)"
    )
