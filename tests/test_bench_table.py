"""`make bench`'s table: how figures become met / not met, what a benchmark that gave nothing shows,
and how the table lands in docs/PERFORMANCE.md. No benchmark runs here and no time is asserted."""
from bench import __main__ as runner
from bench.figures import FIGURES_FILE, record


def _figures(tmp_path, monkeypatch, rows: dict[str, float]) -> dict:
    figures_file = tmp_path / "figures.jsonl"
    monkeypatch.setenv(FIGURES_FILE, str(figures_file))
    for key, value in rows.items():
        record(key, value, "detail of " + key)
    return runner.read_figures(figures_file)


def _row(lines: list[str], label: str) -> list[str]:
    line = next(line for line in lines if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_a_figure_on_the_right_side_of_its_goal_is_met_in_either_direction(tmp_path, monkeypatch):
    figures = _figures(tmp_path, monkeypatch, {"retrieve.p95_ms.1": 20.0, "retrieve.rps.8": 120.0,
                                               "retrieve.p95_ms.8": 125.0, "embedding.batch_ratio": 3.0})
    lines = runner.table(figures, failures={})
    against_and_verdict = [(row[3], row[5]) for row in (_row(lines, label) for label in (
        "Retrieve API: 1 client, unique queries, p95", "Retrieve API: 8 clients, unique queries, throughput",
        "Retrieve API: 8 clients, unique queries, p95"))]
    assert against_and_verdict == [("1.25×", "**met**"), ("0.80×", "not met"), ("0.80×", "not met")]
    assert _row(lines, "Embedding: batch throughput, ONNX against torch")[2] == "3.00 × (detail of embedding.batch_ratio)"


def test_a_goal_can_be_another_systems_figure(tmp_path, monkeypatch):
    figures = _figures(tmp_path, monkeypatch, {"peers.recall_memweb": 0.99, "peers.recall_mem0": 1.0})
    row = _row(runner.table(figures, failures={}), "Search: recall@5 at least Mem0's")
    assert row[1] == "≥ Mem0's" and row[-1] == "not met"


def test_a_benchmark_that_gave_no_figures_is_reported_with_its_reason(tmp_path, monkeypatch):
    figures = _figures(tmp_path, monkeypatch, {})
    lines = runner.table(figures, failures={"demo": "it exited 1 (see /tmp/demo.log)"})
    assert _row(lines, "First start: the whole demo")[2:] == ["not measured: it exited 1 (see /tmp/demo.log)", "",
                                                              "", "not measured"]
    assert len(lines) == 2 + len(runner.TARGETS)  # every target has its row, measured or not


def test_a_benchmark_run_alone_records_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(FIGURES_FILE, raising=False)
    record("demo.seconds", 12.0)
    assert list(tmp_path.iterdir()) == []


def test_the_table_goes_under_the_title_once_then_replaces_itself(tmp_path):
    document = tmp_path / "PERFORMANCE.md"
    document.write_text("# Performance\n\nThe sections.\n")
    runner.write_into(document, ["first table"])
    runner.write_into(document, ["second table", "| a | b |"])
    text = document.read_text()
    assert text.startswith(f"# Performance\n\n{runner.TABLE_START}\nsecond table\n| a | b |\n{runner.TABLE_END}\n")
    assert "first table" not in text and text.count(runner.TABLE_START) == 1 and text.endswith("The sections.\n")


def test_every_target_names_a_step_that_exists():
    steps = {step.name for step in runner.STEPS}
    assert {target.step for target in runner.TARGETS} <= steps
