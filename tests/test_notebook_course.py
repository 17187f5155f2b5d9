"""Notebooks 1-4 read as a course: a frame, cells a learner can read, and the learner's own provider at work."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
ARTICLE = sorted(NOTEBOOKS.glob("0[1-4]_*.ipynb"))
MAX_LINES = 40


def cells(path: Path) -> list[nbformat.NotebookNode]:
    return list(nbformat.read(path, as_version=4).cells)


def test_the_article_has_four_notebooks() -> None:
    assert len(ARTICLE) == 4


@pytest.mark.parametrize("path", ARTICLE, ids=lambda p: p.name)
def test_a_notebook_opens_with_what_you_learn_and_need_and_ends_with_an_exercise(path: Path) -> None:
    text = [cell.source for cell in cells(path)]
    opening = text[0]
    assert "**What you'll learn**" in opening and "**What you'll need**" in opening
    assert any("## Recap" in t or "## まとめ" in t for t in text), "no recap"
    exercise = next(i for i, t in enumerate(text) if "## On your own" in t)
    follow = cells(path)[exercise + 1 : exercise + 3]
    assert [c.cell_type for c in follow] == ["code", "code"]
    assert "from chatlab.tutorial.exercises import check_" in follow[1].source, "the check is one of the course's"
    assert "## Differences from the article" in "\n".join(text), f"{path.name}: no list of the differences"


def test_notebook_4_has_the_articles_explanation_and_summary() -> None:
    text = "\n".join(cell.source for cell in cells(NOTEBOOKS / "04_second_run.ipynb"))
    explanation = text[text.index("## 解説") : text.index("## まとめ")]
    for point in (
        "履歴の読み出し",
        "履歴の保存",
        "セッションには履歴本体を持たせない",
        "別セッションは完全に分離される",
        "保存先を差し替えやすい",
    ):
        assert point in explanation, f"解説 lacks {point}"
    summary = text[text.index("## まとめ") : text.index("## Differences from the article")]
    assert "セッションごとに別の会話キーが割り当てられるため、複数会話を分離して扱える" in summary
    assert summary.count("\n- ") == 4, "まとめ has the article's four points"


def test_notebook_3s_llm_cell_uses_the_articles_three_values() -> None:
    code = "\n".join(c.source for c in cells(NOTEBOOKS / "03_running_the_agent.ipynb") if c.cell_type == "code")
    for value in ('"http://localhost:1234/v1"', '"openai/gpt-oss-20b"', '"sk-dummy"', "python -m chatlab llm check"):
        assert value in code


@pytest.mark.parametrize("path", ARTICLE, ids=lambda p: p.name)
def test_code_cells_are_short_and_run_no_other_notebook(path: Path) -> None:
    for cell in cells(path):
        if cell.cell_type != "code":
            continue
        lines = len(cell.source.splitlines())
        assert lines <= MAX_LINES, f"{path.name}: a code cell of {lines} lines"
        for banned in ("exec(", "nbformat", ".ipynb"):
            assert banned not in cell.source, f"{path.name}: {banned!r} in a code cell"


def test_notebook_3_runs_the_agent_with_the_learners_class_first() -> None:
    code = "\n".join(c.source for c in cells(NOTEBOOKS / "03_running_the_agent.ipynb") if c.cell_type == "code")
    first_run = code.index("await agent.run(")
    assert "from remote_provider import RemoteChatHistoryProvider" in code[:first_run]
    assert "chatlab.RemoteChatHistoryProvider(" not in code[:first_run]
    assert "OpenAIChatCompletionClient(model=model, base_url=base_url, api_key=" in code


@pytest.mark.parametrize("name", ["03_running_the_agent.ipynb", "04_second_run.ipynb"])
def test_the_article_pauses_10_seconds(name: str) -> None:
    code = "\n".join(c.source for c in cells(NOTEBOOKS / name) if c.cell_type == "code")
    assert "chatlab.pause(10)" in code and "asyncio.sleep" not in code
