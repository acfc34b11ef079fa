"""memweb_client's run_transcripts and traces decode memweb's real answers (the server's own
answers, handed to the client through httpx.MockTransport), and a missing task is a NotFound
carrying the server's reason."""
import httpx
import pytest
from django.test import Client as DjangoClient
from memweb_client import Client, NotFound, TracePage, Transcripts

from evaluation.runs.services import run_drive
from tests.evaluation.conftest import builtin  # noqa: F401  (a fixture launch needs)
from tests.evaluation.runs.conftest import TASK_IDS, launch  # noqa: F401  (launch is a fixture)
from tests.evaluation.test_traces import a_call, a_task, an_episode


def through_django(secret: str) -> Client:
    """A client whose requests are answered by this test's memweb, in process."""
    server = DjangoClient()

    def answer(request: httpx.Request) -> httpx.Response:
        reply = server.generic(request.method, request.url.path, data=request.content,
                               QUERY_STRING=request.url.query.decode(), headers={"Authorization": f"Bearer {secret}"})
        return httpx.Response(reply.status_code, content=reply.content, headers={"Content-Type": reply["Content-Type"]})

    return Client("http://memweb.test", secret, transport=httpx.MockTransport(answer))


@pytest.mark.django_db
def test_run_transcripts_decodes_both_sides_turn_by_turn(launch, api_key):  # noqa: F811
    baseline, memory = run_drive(run=launch(memory_mode="none", trials=1)), run_drive(run=launch(trials=1))
    with through_django(api_key) as memweb:
        compared = memweb.run_transcripts(memory.pk, baseline.pk, TASK_IDS[0])
        assert isinstance(compared, Transcripts) and compared.trial == 1 and compared.trials == [1]
        assert (compared.a.run.id, compared.b.run.id) == (memory.pk, baseline.pk)
        assert compared.a.run.scripted and compared.a.episode is not None
        assert [turn.number for turn in compared.a.turns] and compared.a.turns[0].events[0]["type"] == "customer"
        assert all(isinstance(turn.memories, list) for turn in compared.a.turns + compared.b.turns)
        assert [row.number for row in compared.rows] == sorted({t.number for t in compared.a.turns + compared.b.turns})
        with pytest.raises(NotFound, match="no transcript of task shop-nowhere"):
            memweb.run_transcripts(memory.pk, baseline.pk, "shop-nowhere")


@pytest.mark.django_db
def test_traces_decodes_a_page_of_calls(api_key):
    episode = an_episode(a_task())
    call = a_call(episode, role="actor", model="local-unpriced", turn=2)
    with through_django(api_key) as memweb:
        page = memweb.traces(role="actor", page_size=10)
    assert isinstance(page, TracePage) and page.count == 1
    trace = page.items[0]
    assert (trace.id, trace.episode_id, trace.turn, trace.cost, trace.trace_id) == (
        call.pk, episode.pk, 2, None, str(episode.trace_id))  # no price configured: the cost is unknown
