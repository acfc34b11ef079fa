"""In chromium: a task in the compare page's flip table opens both runs' transcripts side by side at
the first trial whose verdicts differ; the trial selector switches trial; at 390 px the two columns
stack (A above B) without sideways scrolling. Screenshots at 1440 and 390 px go to /tmp/shots-sbs."""
import re
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.runs.services import run_drive
from tests.browser import login
from tests.evaluation.runs.conftest import TASK_IDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp/shots-sbs")
SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def test_it_opens_a_flip_side_by_side_switches_trial_and_stacks_on_a_phone(browser_page, live_server, operator_user,
                                                                            launch):
    baseline, memory = run_drive(run=launch(memory_mode="none", name="baseline")), run_drive(run=launch(name="memory"))
    task = sorted(TASK_IDS)[-1]
    verdicts = {side: dict(run.run_episodes.filter(task_key=task).values_list("trial__number", "success"))
                for side, run in (("a", memory), ("b", baseline))}
    flipped = min(number for number in verdicts["a"] if verdicts["a"][number] != verdicts["b"][number])
    other_trial = max(set(verdicts["a"]) - {flipped})
    page = browser_page
    page.set_viewport_size({"width": 1440, "height": 1000})
    login(page, live_server, operator_user)
    page.goto(f"{live_server.url}{reverse('evaluation:run_compare')}?runs={baseline.pk}&runs={memory.pk}")
    page.locator(f"#pair-{memory.pk}-flips").get_by_role("link", name=task, exact=True).click()

    expect(page.locator("h1")).to_contain_text(f"task {task}, trial {flipped}")
    expect(page.locator("#sbs-side-A")).to_contain_text(f"#{memory.pk} memory")
    expect(page.locator("#sbs-side-B")).to_contain_text(f"#{baseline.pk} baseline")
    expect(page.locator("#sbs-side-A .badge-scripted").first).to_have_text("scripted")
    expect(page.locator("#sbs-first-difference")).to_contain_text("First difference: turn 1")
    first_row = page.locator("#turn-1")
    orb_links = first_row.locator('[data-side="A"] details.memory').get_by_role("link", name=re.compile(r"^Orb #\d+$"))
    expect(orb_links.first).to_be_visible()  # the injected memories are shown unfolded, each linked
    expect(first_row.locator('[data-side="A"] .bubble-user')).to_be_visible()
    cells = page.locator("#turn-2 .sbs-cell").all()
    assert cells[0].bounding_box()["y"] == cells[1].bounding_box()["y"]  # side by side
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "transcripts-1440.png"), full_page=True)

    page.locator("#sbs-trials").get_by_role("link", name=str(other_trial), exact=True).click()
    expect(page.locator("h1")).to_contain_text(f"task {task}, trial {other_trial}")
    expect(page.locator("#sbs-trials [aria-current]")).to_have_text(str(other_trial))

    page.set_viewport_size({"width": 390, "height": 900})
    cells = page.locator("#turn-2 .sbs-cell").all()
    assert cells[0].bounding_box()["y"] + cells[0].bounding_box()["height"] <= cells[1].bounding_box()["y"]  # A above B
    assert page.evaluate(SIDEWAYS) <= 0
    page.screenshot(path=str(SHOTS / "transcripts-390.png"), full_page=True)
    page.screenshot(path=str(SHOTS / "transcripts-390-top.png"))
    page.locator('[data-side="A"] details.tool-call summary').first.click()
    expect(page.locator('[data-side="A"] details.tool-call pre').first).to_be_visible()
    assert page.evaluate(SIDEWAYS) <= 0
    page.locator('[data-side="A"] details.tool-call').first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "transcripts-390-tool-open.png"))

    page.goto(f"{live_server.url}{reverse('evaluation:run_compare')}?runs={baseline.pk}&runs={memory.pk}")
    expect(page.locator(f"#pair-{memory.pk}-flips")).to_be_visible()
    assert page.evaluate(SIDEWAYS) <= 0  # the flip table, with its links, scrolls inside its card
    page.screenshot(path=str(SHOTS / "compare-390.png"), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 1000})
    page.screenshot(path=str(SHOTS / "compare-1440.png"), full_page=True)
