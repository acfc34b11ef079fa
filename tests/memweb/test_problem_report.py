"""memweb.problem_report: an import's problems grouped per record, worded per field, capped."""
from memweb.problem_report import problem_report, problem_sentence


def test_it_words_validator_messages_as_sentences_about_the_field():
    cases = {("instruction", "Field required"): "missing field `instruction`",
             ("gold_actions.2.name", "Input should be a valid string"): "`gold_actions[2].name` must be a string",
             ("trials", "Input should be greater than or equal to 1"): "`trials` must be at least 1",
             ("emotion", "Input should be 'angry' or 'calm'"): "`emotion` must be one of 'angry' or 'calm'",
             ("extra", "Extra inputs are not permitted"): "unknown field `extra`",
             ("name", "String should have at least 1 character"): "`name` must not be empty",
             ("content_hash", "is not the Orb's id"): "`content_hash` is not the Orb's id",
             ("episodes.3", "Value error, success must be null"): "`episodes[3]`: success must be null",
             ("(line)", "not valid JSON"): "not valid JSON",
             ("", "Value error, success must be true"): "success must be true"}
    assert {case: str(problem_sentence(*case)) for case in cases} == cases


def test_it_groups_per_record_names_missing_fields_together_and_caps_the_list():
    problems = [("task 1", "a", "Field required"), ("task 1", "b.0", "Input should be a valid integer"),
                ("task 1", "c", "Field required"), ("task 2", "", "not valid JSON")]
    problems += [(f"task {n}", "x", "Field required") for n in range(3, 30)]
    report = problem_report(problems, max_records=3, max_per_record=1)
    assert [record.record for record in report.records] == ["task 1", "task 2", "task 3"]
    first = report.records[0]
    assert [str(p) for p in first.problems] == ["missing fields `a`, `c`"] and first.more == 1
    assert report.more_records == 26 and report.record_count == 29 and report.total == 31
