"""Issue 27's proof that memory layers and environments are plug-ins: the example memory layer
(examples/memweb_example_layer) and the toy library environment (examples/memweb_toy_env), each
installed as a separate package, are offered by the launch form, run from it, and compared on the
compare page, in chromium, with no line of memweb naming either."""
import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.environments import environment, environments_refresh
from evaluation.memory_layers.registry import memory_layer, memory_layers_refresh
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from evaluation.services import taskset_builtin_load
from tests.browser import login
from tests.evaluation.runs.conftest import prepared
from tests.support.packages import package_install, packages_importable

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def plug_ins(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("plug-ins")
    with packages_importable(*(package_install(name, scratch) for name in ("memweb_example_layer", "memweb_toy_env"))):
        memory_layers_refresh(), environments_refresh()
        yield memory_layer("last_outcome"), environment("library")
    memory_layers_refresh(), environments_refresh()


def _launch_from_the_form(page, live_server, *, name: str, task_set: str, memory: str) -> EvaluationRun:
    page.goto(live_server.url + reverse("evaluation:run_new"))
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Task set").select_option(task_set)
    page.locator("#id_memory_mode").select_option(memory)
    page.get_by_label("Trials", exact=True).fill("2")
    page.get_by_role("button", name="Launch run").click()
    expect(page.locator("#run-status")).to_be_visible()
    return run_drive(run=prepared(EvaluationRun.objects.get(name=name)))  # played here, whatever queued it


def test_an_installed_layer_and_environment_launch_play_and_compare_in_the_browser(
        browser_page, live_server, operator_user, plug_ins):
    layer, library = plug_ins
    taskset_builtin_load(environment_name="library")
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:run_new"))
    expect(page.locator(f"#id_memory_mode option[value=\"{layer.name}\"]")).to_have_text(layer.label)

    plain = _launch_from_the_form(page, live_server, name="library · no memory", task_set="library-5", memory="none")
    remembered = _launch_from_the_form(page, live_server, name="library · last outcome", task_set="library-5",
                                       memory=layer.name)
    assert (plain.status, remembered.status) == ("completed", "completed")
    assert remembered.episodes_total == plain.episodes_total == 2 * len(library.builtin_tasks())
    told = remembered.run_episodes.filter(trial__number=2).select_related("episode").first().episode
    assert told.task.environment == "library" and told.memories[0]["last_outcome"]["retrieved"] == 1

    page.goto(live_server.url + remembered.get_absolute_url())
    expect(page.locator("#run-memory-page")).to_be_visible()
    page.goto(f"{live_server.url}{reverse('evaluation:run_compare')}?runs={plain.pk}&runs={remembered.pk}")
    expect(page.locator("#compare-refusal")).to_have_count(0)
    verdict = page.locator(".verdict").first
    expect(verdict).not_to_be_empty()
    expect(page.locator("main")).to_contain_text(layer.label)
    expect(page.locator("main")).to_contain_text("library · last outcome")
