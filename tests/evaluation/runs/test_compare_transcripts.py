"""Two runs' transcripts of one task side by side: turns aligned by number, the first difference
named, trials and the tasks both runs played to move between, the compare page's links to it, and
a clear 404 for whatever cannot be shown (an unknown run, another workspace's, a task or trial one
run never played)."""
import pytest
from django.urls import reverse

from evaluation.runs.services import run_drive
from evaluation.runs.services.transcripts import first_difference, turns_align
from evaluation.services.timeline import episode_timeline
from memweb.models import Workspace
from memweb.roles import Role
from tests.evaluation.runs.conftest import TASK_IDS

VIEW = "evaluation:run_compare_transcripts"


def turn(number: int, *, said: str = "hello", block: str = "", tools=(), reply: str = "ok") -> dict:
    """A timeline turn as episode_timeline gives it, with only what the comparison reads."""
    events = [{"type": "customer", "text": said, "ended": False},
              *({"type": "tool", "name": name, "arguments": args} for name, args in tools),
              {"type": "reply", "text": reply}]
    return {"number": number, "events": events, "memory": {"prompt_block": block} if block is not None else None,
            "step_memories": []}


def test_it_aligns_turn_by_turn_and_leaves_a_cell_empty_once_a_side_has_ended():
    rows = turns_align(a=[turn(1), turn(2)], b=[turn(1), turn(2), turn(3, reply="bye")])
    assert [(row["number"], row["a"] is not None, row["b"] is not None) for row in rows] == [
        (1, True, True), (2, True, True), (3, False, True)]
    assert [row["differs"] for row in rows] == [[], [], ["A had ended"]]
    assert first_difference(rows)["number"] == 3


def test_it_names_what_the_first_differing_turn_differs_in():
    same = turn(1, block="")
    a = [same, turn(2, block="Orb: look the order up first", tools=[("get_order", {"order_id": "W1"})])]
    b = [turn(1, block=None), turn(2, tools=[("get_order", {"order_id": "W2"})])]
    rows = turns_align(a=a, b=b)
    # An empty memory block gave the agent nothing: the same as no retrieval at all.
    assert rows[0]["differs"] == []
    assert first_difference(rows) == rows[1] and rows[1]["differs"] == ["memories", "tool calls"]
    assert first_difference(turns_align(a=[turn(1)], b=[turn(1)])) is None


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def _episode(run, task: str, trial: int):
    return run.run_episodes.get(task_key=task, trial__number=trial).episode


def test_a_flip_row_opens_both_transcripts_side_by_side_at_the_first_flipped_trial(operator, launch):
    baseline, memory = run_drive(run=launch(memory_mode="none", name="baseline")), run_drive(run=launch(name="memory"))
    compare = operator.get(reverse("evaluation:run_compare"), {"runs": [baseline.pk, memory.pk]}).content.decode()
    for task in TASK_IDS:
        assert f'{reverse(VIEW)}?a={memory.pk}&amp;b={baseline.pk}&amp;task={task}"' in compare

    task = TASK_IDS[0]
    response = operator.get(reverse(VIEW), {"a": memory.pk, "b": baseline.pk, "task": task})
    assert response.status_code == 200
    compared = response.context["compared"]
    verdicts = {number: (_episode(memory, task, number).success, _episode(baseline, task, number).success)
                for number in compared["trials"]}
    first_flip = min(number for number, (a, b) in verdicts.items() if a != b)
    assert compared["trial"] == first_flip and compared["trials"] == [1, 2, 3]
    episode_a, episode_b = _episode(memory, task, first_flip), _episode(baseline, task, first_flip)
    assert compared["a"]["episode"] == episode_a and compared["b"]["episode"] == episode_b
    # Every turn of either episode's own timeline (its closing message included) is a row, in order.
    numbers = {t["number"] for episode in (episode_a, episode_b) for t in episode_timeline(episode=episode)["turns"]}
    assert [row["number"] for row in compared["rows"]] == sorted(numbers)
    page = response.content.decode()
    assert episode_a.get_absolute_url() in page and episode_b.get_absolute_url() in page
    assert page.count('class="badge badge-scripted"') >= 2  # both runs are scripted, and say so
    # The memory run's first turn had memories injected: their text and their Orbs' links are shown.
    hits = [hit for hit in episode_a.memories[0]["hits"] if hit["injected"]]
    assert hits and reverse("orbs:detail", args=[hits[0]["orb_id"]]) in page
    first = compared["first_difference"]
    assert first["number"] == 1 and "memories" in first["differs"]
    assert '<strong>First difference: <a href="#turn-1">turn 1</a></strong>' in page and 'id="turn-1"' in page
    # The turn partial is the episode page's own: both pages draw the turn, neither shows template text.
    episode_page = operator.get(episode_a.get_absolute_url()).content.decode()
    for html in (page, episode_page):
        assert "{#" not in html and "{% comment" not in html and html.count('class="span small" data-span="customer"') >= 2


def test_it_switches_trial_and_walks_the_tasks_both_runs_played(operator, launch):
    whole = run_drive(run=launch(memory_mode="none", trials=2))
    part = run_drive(run=launch(task_ids=TASK_IDS[:2], trials=2))
    shared = sorted(TASK_IDS[:2])
    first = operator.get(reverse(VIEW), {"a": part.pk, "b": whole.pk, "task": shared[0], "trial": "2"})
    compared = first.context["compared"]
    assert compared["trial"] == 2 and compared["a"]["episode"] == _episode(part, shared[0], 2)
    assert (compared["position"], compared["shared"], compared["previous"], compared["next"]) == (1, 2, None, shared[1])
    assert f'?a={part.pk}&amp;b={whole.pk}&amp;task={shared[0]}&amp;trial=1"' in first.content.decode()
    last = operator.get(reverse(VIEW), {"a": part.pk, "b": whole.pk, "task": shared[1]}).context["compared"]
    assert (last["position"], last["previous"], last["next"]) == (2, shared[0], None)

    # The compare page's statistics cover the shared tasks and say how many each run played alone.
    page = operator.get(reverse("evaluation:run_compare"), {"runs": [whole.pk, part.pk], "shared": "1"}).content.decode()
    assert (f"On the 2 tasks both runs played</strong>; 0 only in #{part.pk}, 1 only in #{whole.pk}") in page
    assert "shop-clo-008</a>" not in page


def test_it_says_what_cannot_be_shown_with_a_404(operator, launch):
    whole = run_drive(run=launch(memory_mode="none", trials=1))
    part = run_drive(run=launch(task_ids=TASK_IDS[:2], trials=1))
    pair = {"a": part.pk, "b": whole.pk}
    cases = [({"a": 999999, "b": whole.pk, "task": TASK_IDS[0]}, "run A: no run #999999 in this workspace"),
             ({"b": whole.pk, "task": TASK_IDS[0]}, "run A: no run given"),
             ({"a": whole.pk, "b": whole.pk, "task": TASK_IDS[0]}, f"runs A and B are both run #{whole.pk}"),
             ({**pair, "task": "shop-clo-008"}, f"run #{part.pk} has no transcript of task shop-clo-008; pick one of "
                                                "the 2 tasks both runs played"),
             ({**pair}, "task (none given)"),
             ({**pair, "task": TASK_IDS[0], "trial": "9"}, "trial 9 of task shop-app-001 was played by neither run"),
             ({**pair, "task": TASK_IDS[0], "trial": "x"}, "trial 'x' is not a trial number (trials played: 1)")]
    for params, message in cases:
        response = operator.get(reverse(VIEW), params)
        assert response.status_code == 404 and message in response.context["error"], params
        assert 'id="sbs-error"' in response.content.decode()
    offered = operator.get(reverse(VIEW), {**pair, "task": "shop-clo-008"})
    assert offered.context["shared"] == sorted(TASK_IDS[:2])
    assert f'href="?a={part.pk}&amp;b={whole.pk}&amp;task={TASK_IDS[0]}"' in offered.content.decode()


def test_runs_of_another_workspace_are_unknown_here(client, launch, user_for_role):
    baseline, memory = run_drive(run=launch(memory_mode="none", trials=1)), run_drive(run=launch(trials=1))
    elsewhere = user_for_role(Role.OPERATOR, workspace=Workspace.objects.create(slug="elsewhere", name="Elsewhere"))
    client.force_login(elsewhere)
    response = client.get(reverse(VIEW), {"a": memory.pk, "b": baseline.pk, "task": TASK_IDS[0]})
    assert response.status_code == 404 and response.context["error"] == f"run A: no run #{memory.pk} in this workspace"
    assert "compared" not in response.context and memory.name not in response.content.decode()


def test_each_side_carries_its_runs_scripted_and_gold_replay_labels(operator, launch):
    baseline, memory = run_drive(run=launch(memory_mode="none", trials=1)), run_drive(run=launch(trials=1))
    task_set = memory.task_set
    task_set.provenance = {**task_set.provenance, "benchmark": "tau2-retail"}
    task_set.save(update_fields=["provenance"])
    page = operator.get(reverse(VIEW), {"a": memory.pk, "b": baseline.pk, "task": TASK_IDS[0]}).content.decode()
    for letter in "AB":
        side = page.split(f'id="sbs-side-{letter}"')[1].split("</section>")[0]
        assert ">scripted</span>" in side and "gold-replay agent (uses the gold answer)" in side
