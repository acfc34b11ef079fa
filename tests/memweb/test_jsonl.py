"""memweb.jsonl: the one JSONL import recipe the four importers (annotation items and campaigns,
memory banks, task sets) read through."""
import ast
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memweb.jsonl import (
    LineProblem,
    LineRefused,
    jsonl_objects,
    line_object,
    numbered_lines,
    text_size_problem,
    upload_text,
)

ROOT = Path(__file__).resolve().parents[2]
IMPORTERS = ("annotation/services/intake.py", "annotation/services/transfer.py", "orbs/services/transfer.py",
             "evaluation/services/task_sets.py")


def test_lines_split_at_newlines_only_numbered_as_an_editor_shows_them():
    text = '\ufeff{"a": 1}\n\n{"b": "x\u2028y"}\r\n   \n[1]\n{"c": }'
    assert list(numbered_lines(text)) == [(1, '{"a": 1}'), (3, '{"b": "x\u2028y"}\r'), (5, "[1]"), (6, '{"c": }')]
    problems: list[LineProblem] = []
    assert jsonl_objects(text, problems) == [(1, {"a": 1}), (3, {"b": "x\u2028y"})]
    assert problems == [LineProblem(5, "(line)", "each line must be a JSON object, got list"),
                        LineProblem(6, "(line)", "not valid JSON (Expecting value at column 7)")]


def test_a_line_nested_too_deep_is_refused_by_name():
    with pytest.raises(LineRefused, match="nested deeper than 64 levels"):
        line_object('{"a": ' + "[" * 100 + "]" * 100 + "}")


def test_an_upload_over_the_limit_is_refused_before_it_is_read():
    class Unreadable(SimpleUploadedFile):
        def read(self, *args):
            raise AssertionError("read despite its size")

    assert upload_text(Unreadable("big.jsonl", b"x" * 3 * 1024 * 1024), max_bytes=2 * 1024 * 1024) == (
        None, LineProblem(0, "file", "larger than 2 MB"))
    assert upload_text(SimpleUploadedFile("a.jsonl", "\ufeff{}\n".encode()), max_bytes=1024) == ("{}\n", None)
    text, problem = upload_text(SimpleUploadedFile("a.jsonl", "é".encode("latin-1")), max_bytes=1024)
    assert text is None and problem.reason == "not UTF-8 text (unexpected end of data at byte 0)"
    assert text_size_problem("{}\n" * 4, max_bytes=1024, max_lines=3) == "the file has more than 3 lines"


def test_every_importer_reads_through_the_recipe():
    """No importer splits lines, decodes bytes or checks a line's JSON on its own."""
    own = []
    for name in IMPORTERS:
        tree = ast.parse((ROOT / name).read_text())
        imports_recipe = any(isinstance(node, ast.ImportFrom) and node.module == "memweb.jsonl"
                             or isinstance(node, ast.ImportFrom) and node.module == "memweb"
                             and any(alias.name == "jsonl" for alias in node.names) for node in ast.walk(tree))
        calls = {node.func.attr for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        own += [f"{name}: {call}" for call in sorted(calls & {"splitlines", "decode"})]
        own += [] if imports_recipe else [f"{name}: does not import memweb.jsonl"]
    assert not own, own
