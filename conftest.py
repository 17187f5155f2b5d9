"""Test-run settings shared by pytest and the notebook kernels nbval starts (they inherit the environment).

The test run always uses the offline tutorial model and services it starts itself, whatever LLM or
service this machine has configured. ``pytest --real-llm notebooks`` instead runs the notebooks
against your LLM (``CHATLAB_LLM=endpoint``) and does not compare the outputs of cells tagged
``real-llm-varies``: their wording and counts are the model's own.
"""

from __future__ import annotations

import os

import pytest

VARIES_TAG = "real-llm-varies"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-llm",
        action="store_true",
        help=f"run against the configured LLM endpoint; skip comparing cells tagged {VARIES_TAG}",
    )


def pytest_configure(config: pytest.Config) -> None:
    os.environ["CHATLAB_LLM"] = "endpoint" if config.getoption("--real-llm") else "offline"
    os.environ.pop("CHAT_HISTORY_SERVICE_URL", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--real-llm"):
        return
    for item in items:
        cell = getattr(item, "cell", None)  # nbval's notebook cells
        if cell is not None and VARIES_TAG in cell.metadata.get("tags", []):
            item.options["check"] = False
