"""A customer's right to be forgotten: erase every row of a bank that holds what one customer said
or what was learnt from it, with its vectors, and keep an audit record that holds none of it.

What goes (docs/ERASURE.md lists every table and why each is or is not touched):
- Orbs of the customer, of every status, revisions and deleted ones included, with their review
  history (whose snapshots hold the text) and the retrieval hits that point at them;
- the stored episodes (trajectories) of the customer, queued, failed or reflected;
- the retrieval logs of the customer's own retrievals (query, rewrite and context came from them);
- raw dialogues of the customer (MemoryBench baselines) and their messages;
- DMRM experiences their transitions wrote or updated (a shared entry's Q-value learnt from them),
  the trajectories and applied steps recorded for them, and the DMRM retrievals they asked for;
- stored idempotent answers (memweb) that carry the customer key or any erased text;
- webhook deliveries (memweb) about those Orbs and episodes, or carrying the key or any erased text:
  their payload is scrubbed and they are never sent again;
- the text of those Orbs quoted elsewhere by apps above orbs, through their `erasure_hooks`
  (evaluation episodes' per-turn prompt blocks).
Bank exports are written from these tables when asked for, so none made afterwards holds them.

It runs as a background job (memweb.jobs), each bank in a transaction of its own: a worker that dies
mid-way leaves every bank erased fully or not at all, and the job's re-delivery erases the rest.

The audit record (BankEvent, action customer_erased) keeps the bank, the actor, the time, the
reason, the counts and a SHA-256 of the key: enough to answer "was this customer erased, by whom",
not enough to say what they said.
"""
import hashlib
from dataclasses import dataclass

from django.apps import apps
from django.db import transaction
from django.db.models import Q, QuerySet
from django.urls import reverse

from memweb.jobs import JobContext, JobFailed, job_start
from memweb.models import Job
from memweb.registry import erasure_hooks
from memweb.services import idempotent_answers_forget
from memweb.webhooks import webhook_deliveries_erase
from orbs.dialogues.models import Dialogue
from orbs.errors import FieldRequired
from orbs.models import BankEvent, EpisodeRecord, MemoryBank, Orb, RetrievalLog, ReviewEvent
from orbs.services.deletion import bank_event
from orbs.services.history import ORB_REVISION, REVIEW_EVENT, history_erase, history_lock
from orbs.services.ingest import REMEMBERED_OBS


def _dmrm_model(name: str):
    """A DMRM model of this app, looked up in Django's app registry: DMRM builds on orbs (the import
    stack, docs/ARCHITECTURE.md), so orbs never imports it, yet a customer's erasure must reach its rows."""
    return apps.get_model("orbs", name)


# Shorter texts ("yes", "ok") could sit in any other customer's stored answer too; the key
# itself and the longer texts around them identify the customer's answers.
MIN_TEXT_TO_MATCH = 12
ERASURE_JOB = "orbs.customer_erasure"


@dataclass(frozen=True)
class CustomerRows:
    """Rows of some banks that belong to one customer: what an erasure removes and what the customer's
    timeline (orbs.services.customers) shows, found in this one place so the two never drift apart."""

    orbs: QuerySet
    episodes: QuerySet
    retrievals: QuerySet
    dialogues: QuerySet
    experiences: QuerySet
    experience_trajectories: QuerySet
    experience_steps: QuerySet
    dmrm_retrievals: QuerySet


def customer_key_sha256(customer_key: str) -> str:
    return hashlib.sha256(customer_key.encode()).hexdigest()


def customer_rows(*, banks, customer_key: str) -> CustomerRows:
    """The rows of `customer_key` in `banks` (banks or a queryset of them)."""
    orbs = Orb.objects.filter(bank__in=banks, customer_key=customer_key)
    episodes = EpisodeRecord.objects.filter(bank__in=banks).filter(
        Q(trajectory__customer_key=customer_key) | Q(pk__in=orbs.filter(episode__isnull=False).values("episode_id")))
    # A retrieval names its customer when it reads only their Orbs; that query was theirs.
    retrievals = RetrievalLog.objects.filter(bank__in=banks, filters__customer_key=customer_key)
    steps = _dmrm_model("ExperienceStep").objects.filter(bank__in=banks, customer_key=customer_key)
    experiences = _dmrm_model("Experience").objects.filter(bank__in=banks).filter(
        Q(customer_key=customer_key) | Q(pk__in=steps.filter(experience__isnull=False).values("experience_id")))
    return CustomerRows(orbs, episodes, retrievals, Dialogue.objects.filter(bank__in=banks, customer_key=customer_key),
                        experiences=experiences,
                        experience_trajectories=_dmrm_model("ExperienceTrajectory").objects.filter(
                            bank__in=banks, customer_key=customer_key),
                        experience_steps=steps,
                        dmrm_retrievals=_dmrm_model("DMRMRetrievalLog").objects.filter(
                            bank__in=banks, customer_key=customer_key))


def customer_rows_counts(found: CustomerRows) -> dict[str, int]:
    """Rows per kind, named as an erasure's audit record counts them."""
    return {"orbs": found.orbs.count(), "episodes": found.episodes.count(), "retrievals": found.retrievals.count(),
            "dialogues": found.dialogues.count(), "experiences": found.experiences.count(),
            "experience_trajectories": found.experience_trajectories.count(),
            "dmrm_retrievals": found.dmrm_retrievals.count()}


def _utterances(trajectory: dict) -> list[str]:
    messages = trajectory.get("messages") if isinstance(trajectory, dict) else None
    return [m.get("content", "") for m in messages or [] if isinstance(m, dict)]


def _texts(found: CustomerRows) -> set[str]:
    """What the customer said or was told, as it may be quoted in a stored idempotent answer."""
    texts = set()
    for obs, outcome in found.orbs.values_list("obs", "outcome"):
        texts.update(obs.splitlines())
        texts.add(outcome)
    for trajectory in found.episodes.values_list("trajectory", flat=True):
        texts.update(_utterances(trajectory))
    for query, rewritten in found.retrievals.values_list("query", "rewritten_query"):
        texts.update((query, rewritten))
    texts.update(found.dialogues.values_list("opening", flat=True))
    for goal, observation in found.experiences.values_list("goal", "observation"):
        texts.update((goal, observation))
    return {text.strip() for text in texts if len(text.strip()) >= MIN_TEXT_TO_MATCH} - {REMEMBERED_OBS}


def _delete(bank: MemoryBank, found: CustomerRows, *, orb_ids: list[int], episode_ids: list[int]) -> dict[str, int]:
    """`orb_ids` and `episode_ids` materialised first: the episode query reads the Orbs that are about to go."""
    # Revisions point at the Orbs they replaced (PROTECT); all of them go, so the links go first.
    found.orbs.update(supersedes=None)
    counts = customer_rows_counts(found)
    # Apps above orbs that quote Orbs (evaluation episodes keep their prompt blocks) scrub them first.
    for name, hook in erasure_hooks():
        counts[name] = hook(bank=bank, orb_ids=orb_ids) if orb_ids else 0
    found.orbs.delete()  # with their review events and retrieval hits
    EpisodeRecord.objects.filter(pk__in=episode_ids).delete()
    found.retrievals.delete()  # with their hits
    found.dialogues.delete()  # with their messages
    _dmrm_delete(found)
    return counts


def _dmrm_delete(found: CustomerRows) -> None:
    """The customer's DMRM rows. The entries are materialised first: they are found through the steps."""
    experience_ids = list(found.experiences.values_list("pk", flat=True))
    found.experience_steps.delete()
    _dmrm_model("Experience").objects.filter(pk__in=experience_ids).delete()  # with their events and other applied steps
    found.experience_trajectories.delete()
    found.dmrm_retrievals.delete()


def _named(customer_key: str) -> str:
    # An empty key would name every Orb nobody claimed, not a customer.
    if not customer_key.strip():
        raise FieldRequired("customer_key", "name the customer whose data is to be erased")
    return customer_key.strip()


def customer_erase(*, bank: MemoryBank, customer_key: str, actor, reason: str = "", job_id: int | None = None) -> BankEvent:
    """Erase everything of `customer_key` in `bank` and record that it was done (with counts, and the
    job that did it). Erasing a customer with nothing left is recorded too, so a repeated request is
    on the record."""
    customer_key = _named(customer_key)
    with transaction.atomic():
        history_lock(bank_id=bank.pk)
        found = customer_rows(banks=[bank], customer_key=customer_key)
        texts = _texts(found)
        # The chain keeps the erased rows' hashes (never their content) and expects them gone.
        history_erase(bank_id=bank.pk, reason="customer erasure", rows=[
            (ORB_REVISION, found.orbs.values_list("pk", flat=True)),
            (REVIEW_EVENT, ReviewEvent.objects.filter(orb__in=found.orbs).values_list("pk", flat=True))])
        orb_ids = list(found.orbs.values_list("pk", flat=True))
        episode_ids = list(found.episodes.values_list("pk", flat=True))
        counts = _delete(bank, found, orb_ids=orb_ids, episode_ids=episode_ids)
        counts["idempotent_answers"] = idempotent_answers_forget(values=[customer_key], texts=texts)
        counts["webhook_deliveries"] = webhook_deliveries_erase(
            workspace_id=bank.workspace_id, orb_ids=orb_ids, episode_ids=episode_ids, values=[customer_key],
            texts=texts)
        return bank_event(bank, action=BankEvent.Action.CUSTOMER_ERASED, actor=actor, note=reason.strip(),
                          customer_key_sha256=customer_key_sha256(customer_key), counts=counts, job_id=job_id)


def banks_holding_customer(*, customer_key: str, workspace_id: int) -> QuerySet:
    """The banks of a workspace with any row of the customer, archived ones included, by name."""
    return MemoryBank.objects.filter(pk__in=_banks_holding(customer_key), workspace_id=workspace_id).order_by("name")


def _banks_holding(customer_key: str) -> set[int]:
    """Ids of the banks with any row of the customer (one query per table: a join of all four would
    multiply their rows)."""
    return {bank_id for queryset in (
        Orb.objects.filter(customer_key=customer_key),
        EpisodeRecord.objects.filter(trajectory__customer_key=customer_key),
        RetrievalLog.objects.filter(filters__customer_key=customer_key),
        Dialogue.objects.filter(customer_key=customer_key),
        _dmrm_model("Experience").objects.filter(customer_key=customer_key),
        _dmrm_model("ExperienceStep").objects.filter(customer_key=customer_key),
        _dmrm_model("DMRMRetrievalLog").objects.filter(customer_key=customer_key),
    ) for bank_id in queryset.values_list("bank_id", flat=True).distinct()}


def _banks_to_erase(first: MemoryBank, customer_key: str, every_bank: bool) -> list[MemoryBank]:
    """`first`, then (`every_bank`) every other bank of its workspace holding the customer (copies of a
    bank, a run's bank), archived ones included. Another workspace's banks are its own: nobody here
    may change them, or learn they hold the customer."""
    if not every_bank:
        return [first]
    holding = (banks_holding_customer(customer_key=customer_key, workspace_id=first.workspace_id)
               .exclude(pk=first.pk).order_by("pk"))
    return [first, *holding]


# --- as a background job (memweb.jobs): every bank's erasure can take longer than a request ------

def customer_erasure_start(*, bank: MemoryBank, customer_key: str, actor, reason: str = "",
                           every_bank: bool = False) -> Job:
    """Check the request now (a customer named) and queue the erasure in `bank` (or, `every_bank`,
    everywhere) as a job. The key travels in the job's upload, which is emptied when the job ends,
    never in its title, payload or result."""
    customer_key = _named(customer_key)
    where = f"bank “{bank.name}”" + (" and every bank holding them" if every_bank else "")
    return job_start(kind=ERASURE_JOB, title=f"Erasure of a customer from {where}", upload=customer_key,
                     payload={"bank_id": bank.pk, "reason": reason.strip(), "every_bank": every_bank},
                     user=actor, workspace=bank.workspace)


def _erase_once(bank: MemoryBank, customer_key: str, actor, reason: str, job_id: int) -> None:
    """Each bank in a transaction of its own, skipped when this job has erased it already (a message
    re-delivered after a worker died erases the rest, and records no bank twice)."""
    with transaction.atomic():
        history_lock(bank_id=bank.pk)  # two deliveries of the job take turns on the bank
        if not BankEvent.objects.filter(bank=bank, job_id=job_id).exists():
            customer_erase(bank=bank, customer_key=customer_key, actor=actor, reason=reason, job_id=job_id)


def customer_erasure_job(context: JobContext, *, bank_id: int, reason: str, every_bank: bool) -> dict:
    """The job: the customer erased bank by bank (progress per bank); the result holds the counts and
    the audit records, never the key."""
    first = MemoryBank.objects.of(context.workspace).filter(pk=bank_id).first()
    if first is None or not context.upload:
        raise JobFailed("the bank or the customer key is gone; nothing was erased")
    banks = _banks_to_erase(first, context.upload, every_bank)
    context.progress(0, len(banks), f"Erasing the customer from {len(banks)} bank{'s' if len(banks) != 1 else ''}.")
    for done, bank in enumerate(banks, start=1):
        _erase_once(bank, context.upload, context.user, reason, context.job_id)
        context.progress(done, len(banks), f"Erased from {done} of {len(banks)}: “{bank.name}”.")
    records = list(BankEvent.objects.filter(job_id=context.job_id).order_by("pk"))
    totals = erasure_totals(records)
    removed = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in totals.items())
    link_text = f"Erased from {len(records)} bank{'s' if len(records) != 1 else ''} ({removed}): open “{first.name}”"
    return {"url": reverse("orbs:bank_detail", args=[first.slug]), "link_text": link_text,
            "customer_key_sha256": customer_key_sha256(context.upload), "counts": totals,
            "records": [record.pk for record in records], "banks": [record.bank_name for record in records]}


def erasure_totals(records: list[BankEvent]) -> dict[str, int]:
    """Rows removed per kind, over the records of one erasure."""
    totals: dict[str, int] = {}
    for record in records:
        for kind, n in record.counts.items():
            totals[kind] = totals.get(kind, 0) + n
    return totals
