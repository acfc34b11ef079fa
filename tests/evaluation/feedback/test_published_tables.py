"""The action-model tables docs/FEEDBACK_MODEL.md publishes, cell by cell, against the code.

The table is computed from MemoryBench's inputs (its reference p(S), S0L = 7.5, S0D = 4.5,
k_L = k_D = 1.5, 6.5 % acting users at 86 : 14): a doc cell that the formulas no longer give, or a
formula change that moves a cell, fails here (no database)."""
import re
from pathlib import Path

import pytest

from evaluation.feedback import formulas as fm
from evaluation.feedback.params import FeedbackParams

DOC = Path(__file__).resolve().parents[3] / "docs" / "FEEDBACK_MODEL.md"
COLUMNS = ("p_score", "p_like", "p_dislike", "p_none", "p_copy")


def _doc_section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _reference_rows() -> dict[int, dict[str, str]]:
    """S -> the doc's cells as written (strings, so their number of decimals gives the rounding)."""
    rows = {}
    for line in _doc_section("## 2. Like / dislike / none").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].isdigit():
            rows[int(cells[0])] = dict(zip(COLUMNS, cells[1:]))
    return rows


def _within_rounding(written: str, value: float) -> bool:
    decimals = len(written.split(".")[1]) if "." in written else 0
    return abs(float(written) - value) <= 0.5 * 10 ** -decimals + 1e-12


def test_the_doc_table_has_every_score_and_column():
    rows = _reference_rows()
    assert sorted(rows) == list(fm.SCORES)
    assert all(set(row) == set(COLUMNS) for row in rows.values())


def test_every_cell_of_the_reference_action_table_is_what_the_formulas_give():
    model = fm.calibrate()  # the paper's inputs are the defaults
    computed = {row["score"]: row for row in model.table()}
    misses = []
    for score, cells in _reference_rows().items():
        values = {**computed[score], "p_score": fm.DEFAULT_SCORE_DISTRIBUTION[score - 1]}
        misses += [(score, column, cells[column], values[column]) for column in COLUMNS
                   if not _within_rounding(cells[column], values[column])]
    assert misses == []


def test_the_docs_constants_and_global_rates_are_what_calibration_gives():
    model = fm.calibrate()
    written = re.search(r"c_L = ([0-9.]+), c_D = ([0-9.]+)", _doc_section("## 2. Like / dislike / none"))
    assert _within_rounding(written.group(1), model.c_like) and _within_rounding(written.group(2), model.c_dislike)
    assert model.global_rates() == pytest.approx((0.065 * 0.86, 0.065 * 0.14), abs=1e-12)
    assert sum(fm.DEFAULT_SCORE_DISTRIBUTION) == pytest.approx(100.0)


def test_the_binary_models_figures_in_the_doc_are_what_the_formulas_give():
    section = _doc_section("## 3. Binary model")
    example = fm.calibrate_binary(p_low=0.3)
    assert "P(D|3) = 0.0303" in section.replace("\\|", "|") and _within_rounding("0.0303", example.p_dislike_low)
    assert "P(L|9) = 0.0799" in section.replace("\\|", "|") and _within_rounding("0.0799", example.p_like_high)
    default = FeedbackParams().binary_model()
    assert _within_rounding("0.021", default.p_dislike_low) and _within_rounding("0.099", default.p_like_high)
