"""In chromium, a run's life as an operator lives it (issue 18): cancelling asks first and leaves
nothing shown "running"; a run's file, exported and imported, keeps each episode's simulated
feedback; and the run's tables stay inside the screen on a phone."""
import json
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.runs.models import RunEpisode, Trial
from evaluation.runs.services import run_drive, run_start
from tests.browser import login
from tests.evaluation.runs.conftest import TASK_IDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_asks_before_cancelling_and_shows_the_cancelled_trials_and_episodes(
        browser_page, live_server, launch, operator_user, real_broker):
    run = launch(trials=2)
    run_start(run_id=run.pk)  # trial 1 starts; its episodes wait in a broker no worker reads
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())
    expect(page.locator("#run-status")).to_contain_text("running")

    # Cancel without confirmation: the button now asks, and saying no changes nothing.
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#run-status")).to_contain_text("running")
    assert asked and f"Cancel run #{run.pk}?" in asked[0]
    run.refresh_from_db()
    assert run.status == "running"

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#run-status")).to_contain_text("cancelled")
    expect(page.locator(".flash-success")).to_contain_text("Run cancelled")
    # A cancelled trial still shown "running": trials and their episodes say cancelled, on the page and the API.
    trial_states = page.locator("#run-live tbody tr td:nth-child(2)")
    expect(trial_states).to_have_text(["cancelled", "cancelled"])
    expect(page.locator("#heatmap .cell-cancelled")).to_have_count(len(TASK_IDS))
    answer = page.request.get(live_server.url + f"/api/evaluation/runs/{run.pk}").json()
    assert [trial["status"] for trial in answer["progress"]] == ["cancelled", "cancelled"]
    assert set(RunEpisode.objects.filter(run=run).values_list("status", flat=True)) == {"cancelled"}
    assert set(Trial.objects.filter(run=run).values_list("status", flat=True)) == {"cancelled"}


def _download(page, link: str, folder: Path) -> Path:
    with page.expect_download() as download:
        page.get_by_role("link", name=link).click()
    path = folder / download.value.suggested_filename
    download.value.save_as(path)
    return path


def _comparable(episodes: list[dict]) -> list[dict]:
    """Episode lines without the ids that only the exporting server knows."""
    return [{name: value for name, value in line.items() if name != "episode_id"} for line in episodes]


def test_an_exported_run_imports_with_its_feedback_and_fits_a_phone(browser_page, live_server, launch,
                                                                   operator_user, real_broker, tmp_path):
    run = run_drive(run=launch(trials=1, memory_mode="none", feedback_enabled=True))
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())
    exported = _download(page, "Export JSON", tmp_path)
    original = json.loads(exported.read_text())
    assert all(line["feedback"] and 1 <= line["feedback"]["score"] <= 10 for line in original["episodes"])

    # Export -> import dropped the simulated feedback: the imported run shows it and exports it again.
    page.goto(live_server.url + reverse("evaluation:run_import"))
    page.get_by_label("Run JSON").set_input_files(exported)
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#run-status")).to_contain_text("imported")
    feedback = page.locator("section[aria-labelledby='feedback-title']")
    expect(feedback).to_contain_text(f"{len(TASK_IDS)} episodes with feedback")
    (tmp_path / "again").mkdir()
    again = json.loads(_download(page, "Export JSON", tmp_path / "again").read_text())
    assert _comparable(again["episodes"]) == _comparable(original["episodes"])

    # The run page's and the calibration page's tables overflowed a phone's screen.
    page.set_viewport_size({"width": 390, "height": 844})
    for url in (run.get_absolute_url(), reverse("evaluation:feedback_calibration") + f"?run={run.pk}"):
        page.goto(live_server.url + url)
        expect(page.locator("#rates-table")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, url
        for table in page.locator("main .table-wrap").all():
            box = table.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, url
