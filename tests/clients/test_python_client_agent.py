"""memweb_client as an agent uses it, against a live memweb (real HTTP, real PostgreSQL): typed hits from
both clients, an episode written queued and synchronously, and the server's own refusals raised as
their errors. (The operator's routes are walked in test_python_client_live.py.)"""
from datetime import datetime

import pytest
from memweb_client import AsyncClient, Client, Ingest, NotFound, RetryPolicy, Unauthorized, ValidationFailed

from orbs.models import Orb
from orbs.services import bank_get_or_create, orb_approve, orb_from_episode
from tests.orbs.conftest import success_trajectory
from tests.support.event_loop import run_to_end

server_db = pytest.mark.django_db(transaction=True)  # the live server's thread reads what the test wrote
NO_RETRIES = RetryPolicy(max_retries=0)


@pytest.fixture
def support(db):
    return bank_get_or_create(name="support")


@pytest.fixture
def memweb(live_server, api_key):
    with Client(live_server.url, api_key, retry=NO_RETRIES, poll_interval=0.05) as client:
        yield client


def approved_orb(bank, text: str) -> Orb:
    orb = orb_from_episode(bank=bank, trajectory=success_trajectory(text, domain="appliances")).orb
    return orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=None)


@server_db
def test_the_sync_and_async_clients_retrieve_the_same_typed_hits(live_server, api_key, memweb, support):
    for text in ("The blender I bought is too loud", "My fridge is not cooling", "Refund my broken kettle"):
        approved_orb(support, text)

    found = memweb.retrieve("support", "the kettle broke", k=3)

    async def retrieve_async():
        async with AsyncClient(live_server.url, api_key) as client:
            return await client.retrieve("support", "the kettle broke", k=3)

    found_async = run_to_end(retrieve_async())
    assert len(found.hits) == 3
    assert [(h.rank, h.orb.id, h.score) for h in found.hits] == [(h.rank, h.orb.id, h.score) for h in found_async.hits]
    best = found.hits[0].orb
    assert "kettle" in best.obs and best.obs in found.prompt_block
    assert isinstance(best.timestamp, datetime) and best.bank == "support" and best.status == "approved"


@server_db
def test_a_queued_episode_is_waited_for_and_a_synchronous_one_answers_with_its_orb(memweb, support):
    queued = memweb.episode_write("support", success_trajectory("Where is my parcel?", task_id="t-1"),
                                  episode_ref="e1")
    assert queued.status_url.endswith(f"/api/orbs/episodes/{queued.ingest_id}")
    done = memweb.wait_for_episode(queued.ingest_id)
    assert done.status == "done" and done.orb.episode_ref == "e1" and done.created is True

    again = memweb.episode_write("support", success_trajectory("Where is my parcel?", task_id="t-1"), sync=True)
    assert isinstance(again, Ingest)
    assert (again.orb.id, again.created) == (done.orb.id, False)  # the same Orb, already stored


@server_db
def test_the_server_s_refusals_raise_their_own_errors(memweb, live_server, support):
    with pytest.raises(ValidationFailed) as refused:
        memweb.retrieve("support", "a question", k=0, min_score=2.0)
    assert refused.value.status == 422
    assert {("k",), ("min_score",)} <= {problem.loc[-1:] for problem in refused.value.problems}

    with pytest.raises(NotFound) as missing:
        memweb.retrieve("nope", "a question")
    assert missing.value.detail == "No memory bank 'nope'"

    with Client(live_server.url, "mw_not-a-key", retry=NO_RETRIES) as stranger, pytest.raises(Unauthorized):
        stranger.me()
