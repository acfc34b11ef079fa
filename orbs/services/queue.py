"""Listing Orbs for people and programs: the review queue's filters and order."""
from dataclasses import dataclass

from django.db import connection
from django.db.models import Q, QuerySet

from orbs.models import PENDING_FIRST, Orb
from orbs.services.identity import orbs_current_only


@dataclass(frozen=True)
class OrbFilters:
    bank: str = ""  # slug
    status: str = ""
    domain: str = ""
    emotion: str = ""
    source: str = ""
    source_label: str = ""
    customer_key: str = ""
    text: str = ""
    near_duplicates: bool = False
    flagged: bool = False
    all_revisions: bool = False  # else each Orb once, as its current revision


def orbs_filtered(*, filters: OrbFilters) -> QuerySet:
    """Orbs matching every given filter, each as its current revision unless `all_revisions`; text
    search looks in obs, outcome and the hash prefix. The Orbs named as near-duplicate or merge target
    come along (their stable ids are shown), without their vectors. Deleted Orbs only when the status
    filter asks for them."""
    queryset = (Orb.objects.select_related("bank", "reviewer", "near_duplicate_of", "merged_into")
                .defer("vector", "near_duplicate_of__vector", "merged_into__vector"))
    if not filters.all_revisions:
        queryset = orbs_current_only(queryset)
    exact = {
        "bank__slug": filters.bank, "status": filters.status, "domain": filters.domain, "emotion": filters.emotion,
        "source": filters.source, "source_label": filters.source_label, "customer_key": filters.customer_key,
    }
    queryset = queryset.filter(**{name: value for name, value in exact.items() if value})
    if filters.status != Orb.Status.DELETED:
        # Deleted Orbs are shown only to whoever asks for them by status.
        queryset = queryset.exclude(status=Orb.Status.DELETED)
    if filters.text.strip():
        text = filters.text.strip()
        queryset = queryset.filter(
            Q(obs__icontains=text) | Q(outcome__icontains=text) | Q(content_hash__startswith=text.lower())
        )
    if filters.flagged:
        queryset = queryset.filter(flagged_at__isnull=False)
    if filters.near_duplicates:
        queryset = queryset.filter(near_duplicate_of__isnull=False)
    return queryset


def orbs_queue(*, filters: OrbFilters) -> QuerySet:
    """Pending first, then everything else; oldest first within each group."""
    return orbs_filtered(filters=filters).order_by(PENDING_FIRST, "created_at", "id")


# PostgreSQL has no skip scan for DISTINCT: SELECT DISTINCT domain reads every entry of the domain
# index (a million at 1M Orbs). This walks it instead, one index probe per distinct value.
_DOMAINS_SQL = f"""
WITH RECURSIVE domains AS (
    (SELECT domain FROM {Orb._meta.db_table} ORDER BY domain LIMIT 1)
    UNION ALL
    SELECT (SELECT domain FROM {Orb._meta.db_table} WHERE domain > domains.domain ORDER BY domain LIMIT 1)
    FROM domains WHERE domains.domain IS NOT NULL
)
SELECT domain FROM domains WHERE domain IS NOT NULL AND domain <> ''
"""


def orb_domains() -> list[str]:
    """Every domain some Orb names, sorted (the queue's domain filter choices)."""
    with connection.cursor() as cursor:
        cursor.execute(_DOMAINS_SQL)
        return [row[0] for row in cursor.fetchall()]


def orbs_with_outcomes(*, bank) -> list[int]:
    """The bank's Orbs that some retrieval with a known episode outcome returned: the only ones a
    measured effect can exist for (found through the retrievals, not by reading every Orb)."""
    return list(Orb.objects.filter(bank=bank, retrieval_hits__retrieval__outcome_success__isnull=False)
                .order_by().values_list("pk", flat=True).distinct())
