"""The Orbs app's webhook events: an episode ingested, an Orb awaiting review; each after the commit
of the write that made it, to the bank's webhooks and those of every bank."""
import pytest
from django.db import transaction

from memweb.models import WebhookDelivery
from memweb.webhooks import webhook_create, webhook_event_values
from orbs.models import EpisodeRecord, MemoryBank, Orb
from orbs.services import (
    EpisodeToRemember,
    bank_get_or_create,
    episode_reflect,
    episode_submit,
    orb_from_episode,
    orb_remember,
    orbs_from_episodes,
    trajectory_parse,
)
from orbs.vocabulary import OrbsEvent
from tests.orbs.conftest import success_trajectory
from tests.support.webhook_receiver import receiver, verified  # noqa: F401  (receiver is a fixture)


def _received(receiver, event: str) -> list[dict]:
    return [r.json for r in receiver.received if r.headers["X-Memweb-Event"] == event]


@pytest.fixture
def subscribed(bank, receiver):
    """A webhook of this bank for both Orbs events, and one of another bank that must hear nothing."""
    webhook_create(url=receiver.url + "?other", events=webhook_event_values(), bank=bank_get_or_create(name="another-bank").slug)
    return webhook_create(url=receiver.url, events=[OrbsEvent.EPISODE_INGESTED, OrbsEvent.ORB_PENDING_REVIEW],
                          bank=bank.slug)


def test_an_ingested_episode_and_its_pending_orb_are_announced(bank, subscribed, receiver,
                                                                django_capture_on_commit_callbacks):
    _, secret = subscribed
    with django_capture_on_commit_callbacks(execute=True):
        result = orb_from_episode(bank=bank, trajectory=success_trajectory("My kettle arrived broken."),
                                  episode_ref="shop-7")
    episode = EpisodeRecord.objects.get()
    assert result.orb.status == Orb.Status.PENDING
    assert {r.path for r in receiver.received} == {"/hooks/memweb"}  # the other bank's webhook heard nothing
    assert all(verified(r, secret) for r in receiver.received)
    [ingested] = _received(receiver, "episode.ingested")
    assert ingested["bank"] == bank.slug and ingested["data"] == {
        "episode_id": episode.pk, "bank": bank.slug, "source": episode.source, "source_label": "",
        "episode_ref": "shop-7", "success": True, "reward": 1.0,
        "orb_id": result.orb.pk, "orb_created": True, "orb_status": "pending"}
    [pending] = _received(receiver, "orb.pending_review")
    assert pending["data"]["orb_id"] == result.orb.pk and pending["data"]["outcome"] == result.orb.outcome
    assert (pending["data"]["episode_id"], pending["data"]["near_duplicate_of"]) == (episode.pk, None)


def test_a_trial_written_as_one_batch_announces_each_new_orb_as_its_own_first_revision(
        bank, subscribed, receiver, django_capture_on_commit_callbacks):
    episodes = [EpisodeToRemember(success_trajectory(text), f"trial-{n}")
                for n, text in enumerate(["My kettle arrived broken.", "Where is my parcel?"])]
    with django_capture_on_commit_callbacks(execute=True):
        results = orbs_from_episodes(bank=bank, episodes=episodes)
    orbs = [result.orb for result in results]
    assert [(orb.lineage_id, orb.revision) for orb in orbs] == [(orb.pk, 1) for orb in orbs]
    assert sorted(r["data"]["orb_id"] for r in _received(receiver, "orb.pending_review")) == sorted(o.pk for o in orbs)
    assert sorted(r["data"]["episode_ref"] for r in _received(receiver, "episode.ingested")) == ["trial-0", "trial-1"]


def test_a_queued_episode_is_announced_when_its_reflection_is_stored(bank, subscribed, receiver,
                                                                      django_capture_on_commit_callbacks):
    record = episode_submit(bank=bank, trajectory=trajectory_parse(success_trajectory("Where is my parcel?")),
                            queue=False)
    with django_capture_on_commit_callbacks(execute=True):
        episode_reflect(ingest_id=record.pk)
    [ingested] = _received(receiver, "episode.ingested")
    assert ingested["data"]["episode_id"] == record.pk and ingested["data"]["orb_created"] is True


def test_an_auto_approved_orb_is_ingested_but_awaits_no_review(receiver, django_capture_on_commit_callbacks, db):
    bank = bank_get_or_create(name="Trusting shop")
    MemoryBank.objects.filter(pk=bank.pk).update(auto_approve=MemoryBank.AutoApprove.ALWAYS)
    bank.refresh_from_db()
    webhook_create(url=receiver.url, events=webhook_event_values())
    with django_capture_on_commit_callbacks(execute=True):
        orb_from_episode(bank=bank, trajectory=success_trajectory("Please cancel my order."))
    assert [r.headers["X-Memweb-Event"] for r in receiver.received] == ["episode.ingested"]
    assert receiver.received[0].json["data"]["orb_status"] == "approved"


def test_a_remembered_lesson_awaiting_review_is_announced(bank, subscribed, receiver,
                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        result = orb_remember(bank=bank, text="Check the order id before refunding.")
    [pending] = _received(receiver, "orb.pending_review")
    assert pending["data"]["orb_id"] == result.orb.pk and pending["data"]["source"] == "remembered"
    assert _received(receiver, "episode.ingested") == []  # a lesson is no episode


def test_an_ingest_rolled_back_announces_nothing(bank, subscribed, receiver, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            orb_from_episode(bank=bank, trajectory=success_trajectory("My kettle arrived broken."))
            raise RuntimeError("the caller's transaction failed after the ingest")
    assert not Orb.objects.exists() and not WebhookDelivery.objects.exists() and receiver.received == []
