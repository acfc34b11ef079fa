"""In chromium, the run page (issue 32): the Pinned card shows the values the run was pinned with;
the finished-episode count and the learning-curve section follow a run live; the review-queue link
of a run waiting for review is filtered to its bank and offered only to roles that can open it; every
state of the task × trial grid is legible (contrast of at least 4.5:1)."""
import pytest
from playwright.sync_api import expect

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from memweb.roles import Role
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_shows_the_pinned_values_of_a_memorb_run(browser_page, live_server, operator_user, launch):
    run = launch(trials=1)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())

    pins = page.locator("#run-pins")
    expect(pins).to_be_visible()
    shown = dict(zip(pins.locator("dt").all_inner_texts(), pins.locator("dd").all_inner_texts()))
    reward, memory = run.pins["reward"], run.pins["memory"]
    assert shown["Tasks"].startswith("3 tasks at the versions below")
    assert shown["Reward code"] == f"version {reward['version']} · source {reward['source_hash'][:12]}"
    assert shown["Agent"] == f"scripted · configuration {run.pins['agent']['config_hash'][:12]}"
    assert shown["Starting memory"] == (f"bank #{run.bank_id} {run.bank.slug} · 0 Orb rows (0 approved) · latest "
                                        f"revision none · fingerprint {memory['fingerprint'][:12]}")
    page.locator("#run-scoring summary", has_text="Task versions").click()
    expect(page.locator("#run-scoring tbody tr")).to_have_count(3)
    first = page.locator("#run-scoring tbody tr").first
    expect(first.locator("th")).to_have_text("shop-app-001")
    expect(first.locator("td").first).to_have_text("v1")


def test_it_updates_the_finished_count_and_the_learning_curve_section_live(browser_page, live_server, operator_user,
                                                                          launch, real_broker):
    run = launch(trials=1, memory_mode="none", feedback_enabled=True)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())
    curve_section = page.locator("section", has=page.locator("#curve-title"))
    expect(page.locator("#run-usage")).to_contain_text("0 finished episodes")
    expect(curve_section).to_contain_text("Available once the run has completed")

    assert run.status == EvaluationRun.Status.QUEUED  # no worker takes it: this test plays it below
    run_drive(run=run)  # the page is not reloaded: its poll brings the news

    expect(page.locator("#run-status")).to_contain_text("completed")
    expect(page.locator("#run-usage")).to_contain_text("3 finished episodes")
    expect(curve_section.get_by_role("button", name="Measure a learning curve")).to_be_visible()


def _waiting_for_review(launch) -> EvaluationRun:
    run = run_drive(run=launch(trials=2, review_gate="wait"))
    assert run.status == EvaluationRun.Status.WAITING_FOR_REVIEW
    return run


def test_it_links_the_review_queue_filtered_to_the_runs_bank(browser_page, live_server, user_for_role, launch):
    run = _waiting_for_review(launch)
    page = browser_page
    login(page, live_server, user_for_role(Role.ADMIN))
    page.goto(live_server.url + run.get_absolute_url())

    page.locator("#run-live").get_by_role("link", name="review queue").click()

    expect(page.locator("#id_bank")).to_have_value(run.bank.slug)
    assert f"bank={run.bank.slug}" in page.url


def test_it_tells_an_operator_who_reviews_instead_of_a_forbidden_link(browser_page, live_server, operator_user,
                                                                       launch):
    run = _waiting_for_review(launch)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())

    expect(page.locator("#run-live")).to_contain_text(f"a reviewer or an admin of this workspace approves or "
                                                      f"rejects them in the review queue of bank “{run.bank.name}”")
    expect(page.locator("#run-live").get_by_role("link", name="review queue")).to_have_count(0)


# WCAG's contrast ratio of a cell's glyph colour on its background, as the browser computed them.
CONTRAST = """(state) => {
  const cell = document.createElement('span');
  cell.className = 'cell cell-' + state;
  cell.textContent = '✗';
  document.getElementById('heatmap').append(cell);
  const style = getComputedStyle(cell);
  const luminance = (colour) => {
    const [r, g, b] = colour.match(/[\\d.]+/g).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [light, dark] = [luminance(style.color), luminance(style.backgroundColor)].sort((a, b) => b - a);
  cell.remove();
  return (light + 0.05) / (dark + 0.05);
}"""
GRID_STATES = ["success", "failure", "error", "running", "pending", "cancelled"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_it_draws_every_grid_state_with_legible_contrast(scheme, browser_page, live_server, operator_user, launch):
    run = launch(trials=1, memory_mode="none")
    page = browser_page
    page.emulate_media(color_scheme=scheme)
    login(page, live_server, operator_user)
    page.goto(live_server.url + run.get_absolute_url())

    ratios = {state: round(page.evaluate(CONTRAST, state), 2) for state in GRID_STATES}

    assert {state: ratio for state, ratio in ratios.items() if ratio < 4.5} == {}, ratios
