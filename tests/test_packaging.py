"""environment.yml and pyproject.toml install what the tutorial needs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

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
