"""Memory banks: creation, lookup, statistics, and the vector model they hold."""
from datetime import timedelta

from django.conf import settings
from django.db.models import Avg, Count, Q
from django.utils import timezone
from django.utils.text import slugify

from memweb.embeddings import embedder
from memweb.llm.backends import TextBackend
from memweb.roles import Role, has_role
from orbs.budget import DEFAULT_K, orbs_that_fit, prompt_budget_for
from orbs.errors import BankArchived, BankModelMismatch
from orbs.models import EpisodeRecord, MemoryBank, Orb, RetrievalHit, RetrievalLog

# The policy a bank file carries (orbs/services/transfer.py, format version 1).
POLICY_FIELDS = (
    "description", "retrieval_k", "approved_only", "min_score", "near_duplicate_threshold",
    "auto_approve", "auto_approve_min_reward", "prompt_token_budget",
)
# Whom a bank's Orbs belong to; bank files do not carry it yet.
SCOPE_FIELDS = ("customer_scope", "cross_customer_retrieval")
SETTABLE_FIELDS = (*POLICY_FIELDS, *SCOPE_FIELDS)
# The review gate: whether agents see pending Orbs, and which Orbs skip review. Only a reviewer's
# (or admin's) signed-in session sets these; a key, an operator and a bank file get the defaults.
APPROVAL_FIELDS = ("approved_only", "auto_approve", "auto_approve_min_reward")
KEY_CANNOT_SET_APPROVAL = (
    "an API key cannot set a bank's approval policy ({fields}): memories that a key writes would skip "
    "review. Leave them out (the bank then serves approved Orbs only and approves none by itself); a "
    "reviewer sets them on the bank's page")
NEEDS_A_REVIEWER = ("only a reviewer sets a bank's approval policy ({fields}): it decides which memories skip "
                    "review")


# Paths of their own under /orbs/banks/ and /api/orbs/banks/.
RESERVED_SLUGS = ("new", "import")


def bank_slug_unique(name: str) -> str:
    base = slugify(name)[:90] or "bank"
    slug, suffix = base, 2
    while slug in RESERVED_SLUGS or MemoryBank.all_workspaces.filter(slug=slug).exists():
        slug, suffix = f"{base}-{suffix}", suffix + 1
    return slug


def bank_get_or_create(*, name: str, workspace=None, **policy) -> MemoryBank:
    """The bank called `name` in `workspace` (None: the default one), created with `policy` (see
    SETTABLE_FIELDS) when missing; without a prompt budget it gets one that holds its k Orbs. An
    existing bank keeps its own policy. A name another workspace's bank holds fails validation."""
    unknown = set(policy) - set(SETTABLE_FIELDS)
    if unknown:
        raise TypeError(f"unknown bank policy fields: {', '.join(sorted(unknown))}")
    owner = {"workspace": workspace} if workspace is not None else {}
    existing = MemoryBank.objects.filter(name=name, **owner).first()
    if existing:
        return existing
    if policy.get("prompt_token_budget") is None:
        policy["prompt_token_budget"] = prompt_budget_for(policy.get("retrieval_k") or DEFAULT_K)
    bank = MemoryBank(name=name, slug=bank_slug_unique(name), embedding_model=settings.EMBEDDING_MODEL, **owner,
                      **policy)
    bank.full_clean()
    bank.save()
    return bank


def bank_slug_known(*, slug: str, workspace_id: int) -> bool:
    """Whether that workspace has a bank of this slug; another workspace's answers as a missing one."""
    return MemoryBank.objects.filter(slug=slug, workspace_id=workspace_id).exists()


def approval_defaults() -> dict:
    """The approval policy of a bank nobody with the right to choose one set up: review everything,
    serve approved Orbs only."""
    return {name: MemoryBank._meta.get_field(name).get_default() for name in APPROVAL_FIELDS}


def approval_policy_refusal(*, policy: dict, by_key: bool, user) -> str | None:
    """Why this caller may not set `policy`'s approval fields to values other than the defaults
    (None when it may): a key never, a session only when its user reviews in the workspace."""
    chosen = sorted(name for name in APPROVAL_FIELDS if name in policy and policy[name] != approval_defaults()[name])
    if not chosen:
        return None
    if by_key:
        return KEY_CANNOT_SET_APPROVAL.format(fields=", ".join(chosen))
    return None if has_role(user, Role.REVIEWER) else NEEDS_A_REVIEWER.format(fields=", ".join(chosen))


def banks_all(*, workspace=None):
    """Every bank not deleted (archived), in the model's order (for choosers in other apps' forms),
    of `workspace` when given."""
    banks = MemoryBank.objects.filter(archived_at__isnull=True)
    return banks if workspace is None else banks.of(workspace)


def bank_resolve(bank: MemoryBank | str, *, workspace=None) -> MemoryBank:
    """A bank given as instance, slug or name, of `workspace` when given; MemoryBank.DoesNotExist
    when unknown, or another workspace's (a caller cannot tell the two apart)."""
    banks = MemoryBank.objects.all() if workspace is None else MemoryBank.objects.of(workspace)
    if isinstance(bank, MemoryBank):
        if workspace is not None and bank.workspace_id != workspace.pk:
            raise MemoryBank.DoesNotExist(f"No memory bank {bank.slug!r}")
        return bank
    found = banks.filter(slug=bank).first() or banks.filter(name=bank).first()
    if found is None:
        raise MemoryBank.DoesNotExist(f"No memory bank {bank!r}")
    return found


def bank_embedder(bank: MemoryBank):
    """This process's embedder, refusing a bank whose vectors come from another model, and an
    archived (deleted) bank: every new memory and every retrieval embeds first, so none reaches it."""
    if bank.is_archived:
        raise BankArchived(bank.slug)
    model = embedder()
    if bank.embedding_model != model.model_name:
        raise BankModelMismatch(
            f"bank {bank.name!r} holds vectors of {bank.embedding_model}, but this server embeds with "
            f"{model.model_name}; vectors of two models are never compared"
        )
    return model


def _orb_counts(bank: MemoryBank) -> dict:
    """The bank's Orb figures in one pass: a GROUP BY over the covering index orb_bank_stats_idx
    (an index-only scan, the Orbs' rows and vectors unread), summed here by each breakdown."""
    scripted = Q(reflector_backend__startswith=TextBackend.SCRIPTED)
    open_duplicate = Q(status=Orb.Status.PENDING, near_duplicate_of__isnull=False)
    groups = (Orb.objects.filter(bank=bank).order_by().values_list("status", "emotion", "domain")
              .annotate(n=Count("bank"), scripted=Count("bank", filter=scripted),
                        duplicates=Count("bank", filter=open_duplicate)))
    counts = {"total": 0, "scripted": 0, "near_duplicates_open": 0, "status": {}, "emotion": {}, "domain": {}}
    for status, emotion, domain, n, n_scripted, n_duplicates in groups:
        counts["total"] += n
        counts["scripted"] += n_scripted
        counts["near_duplicates_open"] += n_duplicates
        for breakdown, key in (("status", status), ("emotion", emotion), ("domain", domain)):
            key = key or "(none)"
            counts[breakdown][key] = counts[breakdown].get(key, 0) + n
    return counts


def _sorted(counts: dict[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items()))


def bank_stats(*, bank: MemoryBank) -> dict:
    orbs = _orb_counts(bank)
    retrievals = RetrievalLog.objects.filter(bank=bank)
    day_ago = timezone.now() - timedelta(days=1)
    return {
        "bank": bank.slug,
        "total": orbs["total"],
        "by_status": {status: 0 for status in Orb.Status.values} | _sorted(orbs["status"]),
        "by_emotion": _sorted(orbs["emotion"]),
        "by_domain": _sorted(orbs["domain"]),
        "scripted": orbs["scripted"],
        "near_duplicates_open": orbs["near_duplicates_open"],
        "retrievals": retrievals.count(),
        "retrievals_last_24h": retrievals.filter(created_at__gte=day_ago).count(),
        "mean_search_ms": retrievals.aggregate(mean=Avg("search_ms"))["mean"],
        "episodes_failed": EpisodeRecord.objects.filter(bank=bank, status=EpisodeRecord.Status.FAILED).count(),
    }


def bank_policy_update(*, bank: MemoryBank, **policy) -> MemoryBank:
    unknown = set(policy) - set(SETTABLE_FIELDS)
    if unknown:
        raise TypeError(f"unknown bank policy fields: {', '.join(sorted(unknown))}")
    for field, value in policy.items():
        setattr(bank, field, value)
    bank.full_clean()
    bank.save(update_fields=list(policy))
    return bank


def bank_budget_cut(*, bank: MemoryBank) -> dict | None:
    """When the bank's prompt budget may serve fewer than its k Orbs: how many it surely holds, the
    budget that holds k, and how many served hits the budget has cut so far. None when k fits."""
    needed = prompt_budget_for(bank.retrieval_k)
    if bank.prompt_token_budget >= needed:
        return None
    cut = RetrievalHit.objects.filter(retrieval__bank=bank, withheld=False, injected=False).count()
    return {"fits": orbs_that_fit(bank.prompt_token_budget), "k": bank.retrieval_k, "needed": needed, "cut_hits": cut}


def count_pending(*, workspace) -> int:
    """Orbs waiting for a reviewer, over the workspace's banks (the home page's count)."""
    return Orb.objects.of(workspace).filter(status=Orb.Status.PENDING).count()
