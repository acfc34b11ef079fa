"""Finding episodes (issue 18): each filter of the episode list narrows it, filters combine and
survive paging and sorting, the transcript search finds a phrase and ranks the closer match first,
and an empty result says which filter to relax."""
import pytest
from django.urls import reverse

from evaluation.models import Episode, Task, TaskSet
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial

COMPONENTS = ("state", "grounded", "lookups", "outputs")


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def two_tasks() -> list[Task]:
    task_set = TaskSet.objects.create(name="search")
    return [Task.objects.create(task_set=task_set, external_id=f"shop-{name}", domain="clothing", split="test",
                                difficulty="easy", spec={}) for name in ("refund", "exchange")]


@pytest.fixture
def tasks(db):
    return two_tasks()


def episode(task, *, said: list[str], success=True, failed=(), memory="none", agent="scripted") -> Episode:
    breakdown = {name: 0.0 if name in failed else 1.0 for name in COMPONENTS}
    return Episode.objects.create(
        task=task, task_snapshot={}, seed=0, agent_backend=agent, customer_backend="agenda", memory_kind=memory,
        max_turns=12, status="completed", ended_by="stop", success=success, reward=float(success),
        reward_breakdown=breakdown, turns=len(said),
        transcript=[{"role": "user" if i % 2 == 0 else "assistant", "content": text, "turn": i // 2}
                    for i, text in enumerate(said)])


def listed(client, **params) -> list[int]:
    response = client.get(reverse("evaluation:episode_list"), params)
    assert response.status_code == 200
    return [row.pk for row in response.context["page"].object_list]


def test_it_narrows_the_episode_list_by_each_filter(operator, tasks):
    refund, exchange = tasks
    won = episode(refund, said=["I want my money back", "Refund issued"])
    lost_state = episode(refund, said=["Refund please", "Sorry"], success=False, failed=("state",), memory="memorb")
    lost_told = episode(exchange, said=["Swap the shirt", "Done"], success=False, failed=("outputs",), agent="llm")
    run = EvaluationRun.objects.create(name="nightly")
    trial = Trial.objects.create(run=run, number=1)
    RunEpisode.objects.create(run=run, trial=trial, task=exchange, task_key="shop-exchange", status="done",
                              episode=lost_told)
    assert set(listed(operator)) == {won.pk, lost_state.pk, lost_told.pk}
    assert listed(operator, run=run.pk) == [lost_told.pk]
    assert set(listed(operator, task="refund")) == {won.pk, lost_state.pk}
    assert listed(operator, outcome="success") == [won.pk]
    assert set(listed(operator, outcome="failure")) == {lost_state.pk, lost_told.pk}
    assert listed(operator, component="state") == [lost_state.pk]
    assert listed(operator, component="outputs") == [lost_told.pk]
    assert listed(operator, memory="memorb") == [lost_state.pk]
    assert listed(operator, backend="llm") == [lost_told.pk]
    assert set(listed(operator, backend="scripted")) == {won.pk, lost_state.pk}
    # Filters combine.
    assert listed(operator, task="refund", outcome="failure", backend="scripted") == [lost_state.pk]


def test_a_bad_filter_is_named_next_to_its_field(operator, tasks):
    page = operator.get(reverse("evaluation:episode_list"), {"run": "x", "component": "mood"}).content.decode()
    assert "Enter a whole number." in page and "Select a valid choice. mood is not one of the available choices." in page


def test_the_transcript_search_finds_a_phrase_ranks_and_highlights_it(operator, tasks):
    refund, exchange = tasks
    once = episode(refund, said=["My parcel never arrived", "I can check that"])
    twice = episode(exchange, said=["The parcel never arrived, again", "Parcel lost, I am sorry"])
    episode(exchange, said=["Swap the blue shirt", "Done"])
    response = operator.get(reverse("evaluation:episode_list"), {"q": "parcel arrived"})
    assert [row.pk for row in response.context["page"].object_list] == [twice.pk, once.pk]
    body = response.content.decode()
    assert "<mark>parcel</mark> never <mark>arrived</mark>" in body.lower() and "best match first" in body
    # A quoted phrase matches the words in that order only; roles and keys of the JSON are not searched.
    assert listed(operator, q='"arrived parcel"') == []
    assert listed(operator, q="assistant") == []


def test_filters_survive_paging_and_sorting(operator, tasks):
    refund, _ = tasks
    rows = [episode(refund, said=[f"refund number {i}"], success=False, failed=("state",)) for i in range(27)]
    episode(refund, said=["refund that worked"])
    url = reverse("evaluation:episode_list")
    first = operator.get(url, {"outcome": "failure", "sort": "-id"})
    assert [row.pk for row in first.context["page"].object_list] == [r.pk for r in reversed(rows)][:25]
    body = first.content.decode()
    assert 'href="?outcome=failure&amp;sort=-id&amp;page=2"' in body
    assert '<input type="hidden" name="sort" value="-id">' in body
    second = operator.get(url, {"outcome": "failure", "sort": "-id", "page": 2})
    assert [row.pk for row in second.context["page"].object_list] == [rows[1].pk, rows[0].pk]


def test_an_empty_result_says_which_filter_to_relax(operator, tasks):
    refund, _ = tasks
    episode(refund, said=["hello"], success=False, failed=("state",))
    body = operator.get(reverse("evaluation:episode_list"), {"task": "refund", "outcome": "success"}).content.decode()
    assert "No episode passes all these filters" in body
    assert 'href="?outcome=success">Drop task id “refund”</a>: 0 episodes would match' in body
    assert 'href="?task=refund">Drop outcome “success”</a>: 1 episode would match' in body
