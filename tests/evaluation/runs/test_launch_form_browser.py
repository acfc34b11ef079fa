"""In chromium, the launch form (issue 32): it shows the fields of the chosen memory layer only (and
without JavaScript groups them, the server ignoring what the layer does not use); a refused launch
lists every problem at the top, each linking to its field; the Pass^k problem quotes the trials typed."""
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.runs.models import EvaluationRun
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _launch_page(page, live_server, user):
    login(page, live_server, user)
    page.goto(live_server.url + reverse("evaluation:run_new"))


def test_it_shows_only_the_fields_of_the_chosen_memory_layer(browser_page, live_server, operator_user, builtin):
    page = browser_page
    _launch_page(page, live_server, operator_user)
    alpha, reflection, url = page.get_by_label("DMRM α"), page.get_by_label("Reflection", exact=True), \
        page.get_by_label("External memory service URL")

    page.locator("#id_memory_mode").select_option("memorb")
    expect(alpha).to_be_hidden()
    expect(url).to_be_hidden()
    expect(reflection).to_be_visible()

    page.locator("#id_memory_mode").select_option("dmrm")
    expect(alpha).to_be_visible()
    expect(reflection).to_be_hidden()

    page.locator("#id_memory_mode").select_option("none")
    expect(page.get_by_label("k", exact=True)).to_be_hidden()
    expect(page.get_by_role("heading", name=re.compile("^DMRM"))).to_be_hidden()
    page.get_by_label("Name", exact=True).fill("no memory")
    page.get_by_label("Task ids").fill("shop-app-001")
    page.get_by_label("Trials", exact=True).fill("1")
    page.get_by_role("button", name="Launch run").click()  # the hidden fields are not posted, nor missed

    page.wait_for_url(re.compile(r".*/evaluation/runs/\d+/$"))
    assert EvaluationRun.objects.get(name="no memory").memory_mode == "none"


def test_without_javascript_it_groups_the_fields_and_ignores_those_the_layer_does_not_use(
        browser, live_server, operator_user, builtin):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    _launch_page(page, live_server, operator_user)
    expect(page.get_by_label("DMRM α")).to_be_visible()  # every field shows, under a heading naming its layers
    expect(page.get_by_role("heading", name=re.compile("^DMRM"))).to_contain_text("DMRM, MemOrb + DMRM")

    page.get_by_label("Name", exact=True).fill("no script")
    page.get_by_label("Task ids").fill("shop-app-001")
    page.get_by_label("Trials", exact=True).fill("1")
    page.locator("#id_memory_mode").select_option("none")
    page.get_by_label("DMRM α").fill("0.2")  # not used without memory: ignored, not refused
    page.get_by_label("Measure each memory's effect").check()
    page.get_by_role("button", name="Launch run").click()

    page.wait_for_url(re.compile(r".*/evaluation/runs/\d+/$"))
    run = EvaluationRun.objects.get(name="no script")
    assert run.run_spec.dmrm is None and not run.run_spec.memory_effects
    context.close()


def test_it_summarises_the_problems_at_the_top_with_links_to_their_fields(browser_page, live_server, operator_user,
                                                                           builtin):
    page = browser_page
    _launch_page(page, live_server, operator_user)
    page.get_by_label("Name", exact=True).fill("")
    page.get_by_label("Task ids").fill("no-such-task")
    page.get_by_label("Trials", exact=True).fill("0")
    page.get_by_label("Pass^k up to").fill("3")
    page.get_by_role("button", name="Launch run").click()

    summary = page.locator("#launch-errors")
    expect(summary).to_be_focused()
    expect(summary.get_by_role("link")).to_have_count(4)
    expect(summary).to_contain_text("Pass^k up to: Pass^k with k=3 needs at least 3 trials; the run has 0")
    expect(summary).not_to_contain_text("the run has 10")
    summary.get_by_role("link", name=re.compile("^Task ids")).click()
    expect(page.get_by_label("Task ids")).to_be_focused()
    expect(page.locator(".field-error")).to_have_count(4)
