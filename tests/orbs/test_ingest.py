"""Algorithm 1: an episode becomes an Orb, once; near-duplicates are flagged; auto-approval by policy."""
import hashlib
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from memweb.embeddings import embedder
from memweb.models import WorkerHeartbeat
from memweb.registry import worker_beats
from memweb.services import worker_claimant
from orbs.errors import InvalidTrajectory
from orbs.models import EpisodeRecord, MemoryBank, Orb, RetrievalLog, ReviewEvent
from orbs.schemas import TrajectoryIn
from orbs.services import bank_get_or_create, episode_reflect, episode_submit, orb_from_episode, orbs_retrieve
from tests.orbs.conftest import success_trajectory, trajectory


def test_it_builds_the_orb_fields_and_hash_of_algorithm_1(bank):
    data = trajectory()
    result = orb_from_episode(bank=bank, trajectory=data, source_label="run 7", episode_ref="ep-1")
    orb = result.orb
    assert result.created and result.near_duplicate_of is None
    assert orb.obs == (
        "Hi, my dishwasher DW-450 arrived with a cracked door. I want to return it.\n"
        "Cancel? It is already here and broken. This is ridiculous."
    )
    assert orb.emotion == "angry"  # the last user utterance, not the first
    assert "call `return_order` instead of `cancel_order`" in orb.outcome
    assert orb.context == {"reward": 0.0, "success": False, "sku": "DW-450", "order_id": "W1001", "budget": None}
    expected = hashlib.sha256((orb.obs + orb.emotion + orb.outcome).encode()).hexdigest()
    assert orb.content_hash == expected
    provenance = (orb.customer_key, orb.domain, orb.source_label, orb.episode_ref)
    assert provenance == ("cust-4821", "appliances", "run 7", "ep-1")
    assert (orb.status, orb.reflector_backend, orb.emotion_backend) == ("pending", "scripted", "scripted")
    assert orb.episode.trajectory["messages"] == data["messages"]
    document = embedder().embed_one(orb.document)
    assert np.allclose(np.asarray(orb.vector), document, atol=1e-5)
    assert list(orb.events.values_list("action", flat=True)) == [ReviewEvent.Action.CREATED]


def test_it_stores_the_same_episode_only_once(bank):
    data = trajectory()
    first = orb_from_episode(bank=bank, trajectory=data)
    again = orb_from_episode(bank=bank, trajectory=data | {"task_id": "other-id"})
    assert not again.created
    assert again.orb.pk == first.orb.pk
    assert Orb.objects.count() == 1
    assert EpisodeRecord.objects.count() == 1


def test_it_flags_a_near_duplicate_instead_of_storing_it_silently(bank):
    original = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for a size 34?")).orb
    near = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for size 34?"))
    other = orb_from_episode(bank=bank, trajectory=success_trajectory("My toaster sparks when I switch it on."))
    assert near.created and near.near_duplicate_of == original
    assert near.orb.near_duplicate_score >= bank.near_duplicate_threshold
    assert near.orb.status == Orb.Status.PENDING
    assert other.near_duplicate_of is None


def test_it_auto_approves_by_rule_only_good_calm_episodes(db):
    bank = bank_get_or_create(name="Ruled", auto_approve=MemoryBank.AutoApprove.BY_RULE, auto_approve_min_reward=1.0)
    calm = orb_from_episode(bank=bank, trajectory=success_trajectory("Thanks, that is exactly what I needed.")).orb
    upset = orb_from_episode(bank=bank, trajectory=success_trajectory("Fine, but that took ages, so frustrating.")).orb
    failed = orb_from_episode(bank=bank, trajectory=trajectory()).orb
    assert calm.status == Orb.Status.APPROVED
    assert list(calm.events.values_list("action", flat=True)) == ["created", "auto_approved"]
    assert (upset.emotion, upset.status) == ("frustrated", Orb.Status.PENDING)
    assert failed.status == Orb.Status.PENDING


def test_it_names_each_bad_field_and_writes_nothing(bank):
    data = trajectory(reward="lots", messages=[{"role": "robot", "content": "hi"}])
    del data["success"]
    with pytest.raises(InvalidTrajectory) as error:
        orb_from_episode(bank=bank, trajectory=data)
    fields = [field for field, _ in error.value.problems]
    assert "reward" in fields and "success" in fields and "messages.0.role" in fields
    assert not EpisodeRecord.objects.exists() and not Orb.objects.exists()


def test_it_reflects_a_queued_episode_once_even_when_redelivered(bank, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        record = episode_submit(bank=bank, trajectory=TrajectoryIn.model_validate(trajectory()))
    assert len(callbacks) == 1  # queued only once the episode row was committed
    record.refresh_from_db()
    assert record.status == EpisodeRecord.Status.DONE and record.created_orb
    assert episode_reflect(ingest_id=record.pk).orb_id == record.orb_id  # a re-delivered task changes nothing
    assert Orb.objects.count() == 1
    assert EpisodeRecord.objects.get(pk=record.pk).attempts == 1


def _worker_beat() -> None:
    """What each worker heartbeat runs (memweb.celery)."""
    for beat in worker_beats():
        beat()


def test_the_worker_beat_reflects_an_episode_whose_message_was_lost(bank, agent, django_capture_on_commit_callbacks):
    """Old code sent the task once, after the commit: an episode whose message never left (a crash just
    after the commit, a broker down) or was lost with the broker's queue stayed queued for good."""
    url = f"/api/orbs/banks/{bank.slug}/episodes"
    # Written through the API, and its on-commit message never sent: this test's transaction never commits.
    lost, sent_long_ago, just_written = (agent.post(url, {"trajectory": trajectory()}, content_type="application/json")
                                         .json()["ingest_id"] for _ in range(3))
    long_ago = timezone.now() - timedelta(minutes=30)
    EpisodeRecord.objects.filter(pk__in=[lost, sent_long_ago]).update(created_at=long_ago)
    EpisodeRecord.objects.filter(pk=sent_long_ago).update(message_sent_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        _worker_beat()
    reflected = dict(EpisodeRecord.objects.values_list("pk", "status"))
    assert reflected == {lost: EpisodeRecord.Status.DONE, sent_long_ago: EpisodeRecord.Status.DONE,
                         just_written: EpisodeRecord.Status.QUEUED}  # its own message may still be on its way
    assert EpisodeRecord.objects.filter(pk__in=[lost, sent_long_ago], orb__isnull=False).count() == 2


def test_the_worker_beat_sends_an_episode_again_once_its_worker_died_holding_it(bank):
    record = episode_submit(bank=bank, trajectory=TrajectoryIn.model_validate(trajectory()), queue=False)
    long_ago = timezone.now() - timedelta(minutes=30)
    EpisodeRecord.objects.filter(pk=record.pk).update(status=EpisodeRecord.Status.RUNNING, started_at=long_ago,
                                                      message_sent_at=long_ago, created_at=long_ago)
    _worker_beat()
    record.refresh_from_db()
    assert record.status == EpisodeRecord.Status.DONE and record.attempts == 1
    _worker_beat()  # done: nothing more to send
    assert EpisodeRecord.objects.get(pk=record.pk).attempts == 1


def test_the_worker_beat_takes_back_at_once_an_episode_a_restarted_worker_held_but_not_a_live_ones(bank):
    """A reflection claimed by a worker restarted under the same name (its instance's row gone) is sent
    again at the next beat, not after ten minutes; one held by a live worker's process is left alone."""
    now = timezone.now()
    WorkerHeartbeat.objects.create(instance="live", hostname="celery@host", pid=10, processes=[11],
                                   started_at=now, seen_at=now)
    held = {}
    for name, claimant in (("dead", worker_claimant(hostname="celery@host", instance="gone", pid=11)),
                           ("live", worker_claimant(hostname="celery@host", instance="live", pid=11))):
        record = episode_submit(bank=bank, trajectory=TrajectoryIn.model_validate(trajectory()), queue=False)
        EpisodeRecord.objects.filter(pk=record.pk).update(status=EpisodeRecord.Status.RUNNING, started_at=now,
                                                          claimed_by=claimant, message_sent_at=None)
        held[name] = record.pk
    _worker_beat()
    statuses = dict(EpisodeRecord.objects.values_list("pk", "status"))
    assert (statuses[held["dead"]], statuses[held["live"]]) == (EpisodeRecord.Status.DONE, EpisodeRecord.Status.RUNNING)


def test_it_records_why_an_episode_could_not_be_reflected(bank):
    record = EpisodeRecord.objects.create(bank=bank, trajectory={"task_id": "broken"})
    episode_reflect(ingest_id=record.pk)
    record.refresh_from_db()
    assert record.status == EpisodeRecord.Status.FAILED
    assert "messages" in record.error and "reward" in record.error


def test_it_records_how_the_episode_that_used_a_retrieval_ended(bank, make_orb):
    make_orb("My dishwasher door is cracked, I want to return it.")
    retrieval = orbs_retrieve(bank=bank, query="broken dishwasher return", context={})
    orb_from_episode(bank=bank, trajectory=trajectory(metadata={"sku": "X", "retrieval_ids": [retrieval.retrieval_id]}),
                     episode_ref="ep-9")
    log = RetrievalLog.objects.get(pk=retrieval.retrieval_id)
    assert (log.outcome_success, log.outcome_reward, log.outcome_episode_ref) == (False, 0.0, "ep-9")
    assert "retrieval_ids" not in Orb.objects.latest("created_at").context


def test_it_reflects_with_the_llm_and_records_a_fallback(bank, fake_llm):
    fake_llm.use_for("reflector", max_retries=0)
    fake_llm.reply_json({"label": "angry"})
    fake_llm.reply_json({"reflection": "Use return_order for delivered items; never cancel them."})
    orb = orb_from_episode(bank=bank, trajectory=trajectory()).orb
    assert (orb.emotion_backend, orb.reflector_backend) == ("llm:fake-model", "llm:fake-model")
    assert orb.outcome == "Use return_order for delivered items; never cancel them." and not orb.is_scripted
    fake_llm.fail(503)
    fake_llm.fail(503)
    fallback = orb_from_episode(bank=bank, trajectory=success_trajectory("Where is my parcel?")).orb
    assert fallback.reflector_backend == "scripted (LLM failed)" and fallback.is_scripted
    assert "HTTP 503" in fallback.backend_error
