"""GET /api/evaluation/traces: the traces page's LLM calls as JSON, page by page, with the page's
filters (a bad one a 422 naming it), each call beside its episode and run, and only this
workspace's calls."""
import pytest

from memweb.llm.config import ModelPrice
from memweb.models import ApiKey, LLMCall, Workspace
from tests.evaluation.test_traces import PRICED, UNPRICED, a_call, a_task, an_episode, in_run

URL = "/api/evaluation/traces"


@pytest.fixture(autouse=True)
def _prices(settings):
    settings.LLM_PRICES = {PRICED: ModelPrice(prompt=1.0, completion=2.0)}  # dollars per million tokens


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def listed(client, **params) -> list[int]:
    answer = client.get(URL, params)
    assert answer.status_code == 200, answer.content
    return [call["id"] for call in answer.json()["items"]]


def test_each_call_comes_with_its_episode_run_and_cost(operator):
    episode = an_episode(a_task())
    run = in_run(episode)
    call = a_call(episode, role="actor", turn=3, tokens_in=2000, tokens_out=1000, latency_ms=750)
    failed = a_call(episode, role="user_simulator", model=UNPRICED, status="error", error="HTTP 503 from the endpoint")
    body = operator.get(URL).json()
    assert body["count"] == 2 and [row["id"] for row in body["items"]] == [failed.pk, call.pk]  # newest first
    rows = {row["id"]: row for row in body["items"]}
    assert (rows[call.pk]["run_id"], rows[call.pk]["episode_id"], rows[call.pk]["turn"]) == (run.pk, episode.pk, 3)
    assert rows[call.pk]["cost"] == pytest.approx(0.004) and rows[failed.pk]["cost"] is None  # no price: unknown
    assert (rows[failed.pk]["status"], rows[failed.pk]["error"]) == ("error", "HTTP 503 from the endpoint")
    assert rows[call.pk]["trace_id"] == str(episode.trace_id)


def test_each_filter_narrows_the_calls_as_on_the_page(operator):
    task = a_task()
    first, second = an_episode(task), an_episode(task)
    run = in_run(second)
    actor = a_call(first, role="actor", model=PRICED, latency_ms=100)
    simulator = a_call(first, role="user_simulator", model=UNPRICED, latency_ms=2500)
    failed = a_call(second, role="actor", model=PRICED, status="error", error="timeout", latency_ms=9000)
    assert set(listed(operator)) == {actor.pk, simulator.pk, failed.pk}
    assert set(listed(operator, role="actor")) == {actor.pk, failed.pk}
    assert listed(operator, model=UNPRICED) == [simulator.pk]
    assert listed(operator, status="error") == [failed.pk]
    assert set(listed(operator, min_latency=2000)) == {simulator.pk, failed.pk}
    assert listed(operator, run=run.pk) == [failed.pk]
    assert listed(operator, role="actor", min_latency=50, status="ok") == [actor.pk]


@pytest.mark.parametrize("params, field", [({"status": "broken"}, "status"), ({"min_latency": -1}, "min_latency"),
                                           ({"run": 0}, "run"), ({"page": 0}, "page")])
def test_a_bad_filter_is_a_422_naming_it(operator, params, field):
    answer = operator.get(URL, params)
    assert answer.status_code == 422 and field in answer.content.decode()


def test_it_pages_the_calls(operator):
    episode = an_episode(a_task())
    calls = [a_call(episode, latency_ms=ms) for ms in range(3)]
    first = operator.get(URL, {"page_size": 2}).json()
    second = operator.get(URL, {"page_size": 2, "page": 2}).json()
    assert first["count"] == second["count"] == 3
    assert [row["id"] for row in first["items"] + second["items"]] == [call.pk for call in reversed(calls)]


def test_another_workspaces_calls_and_calls_of_no_episode_never_appear(client, operator_user):
    mine = a_call(an_episode(a_task()), role="actor")
    elsewhere = Workspace.objects.create(slug="elsewhere", name="Elsewhere")
    theirs = a_call(an_episode(a_task(elsewhere, name="theirs")), role="their_role", model="their-model")
    LLMCall.objects.create(role="reflector", model=PRICED, base_url="http://llm.test/v1", status="ok")  # no trace
    secret = ApiKey.issue(user=operator_user, name="traces")[1]
    by_key = client.get(URL, headers={"Authorization": f"Bearer {secret}"}).json()
    assert [row["id"] for row in by_key["items"]] == [mine.pk]
    assert theirs.pk not in [row["id"] for row in by_key["items"]] and "their-model" not in str(by_key)
