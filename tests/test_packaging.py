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
