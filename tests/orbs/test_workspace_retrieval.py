"""A property of retrieval over workspaces: across 10^5 random retrievals (any workspace asking for
any bank, any status mix, with or without approved_only, any domain and k), no memory is served
that is unapproved, superseded, rejected, deleted, or from another workspace.

Each retrieval runs the service's own code: the bank is resolved with `bank_resolve(slug,
workspace=...)` (what every API route and page does), the rows with `orbs_retrievable` and ordered
with `vectors_exact_query` (the search a bank of this size gets). To keep 10^5 retrievals within
a few seconds, the service's compiled SQL is run once per (bank, filters, k) for every query vector
of that group, through a LATERAL join over a pool of query vectors: the same SQL text, with only
the query vector's parameter bound to the pool's column.
"""
import random
import re
from collections import defaultdict

import pytest
from django.conf import settings
from django.db import connection

from memweb.embeddings import DIMENSIONS
from memweb.models import Workspace, default_workspace_id
from orbs.models import MemoryBank, Orb
from orbs.services import bank_get_or_create, bank_resolve
from orbs.services.retrieval import orbs_retrievable
from orbs.services.search import vectors_exact_query

RETRIEVALS = 100_000
POOL = 64  # distinct query vectors
ORBS_PER_BANK = 24
STATUSES = [Orb.Status.PENDING, Orb.Status.APPROVED, Orb.Status.REJECTED, Orb.Status.DELETED]
DOMAINS = ["clothing", "appliances"]
KS = (1, 5, 10)
SERVABLE = Orb.Status.APPROVED


def _unit(rng: random.Random, dimension: int) -> list[float]:
    values = [rng.gauss(0, 1) for _ in range(dimension)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def _orb(bank, pk: int, status: str, *, lineage: int, revision: int, supersedes: int | None, rng) -> Orb:
    return Orb(pk=pk, bank=bank, content_hash=f"{pk:064x}", obs=f"obs {pk}", emotion="neutral", outcome=f"lesson {pk}",
               status=status, lineage_id=lineage, revision=revision, supersedes_id=supersedes,
               domain=rng.choice(DOMAINS), vector=_unit(rng, bank.embedding_dimension),
               embedding_model=bank.embedding_model)


def _bank_orbs(bank, first_pk: int, rng) -> list[Orb]:
    """Orbs of every status; every third one edited once: its first revision superseded, the new
    revision of a random status."""
    orbs, pk = [], first_pk
    while len(orbs) < ORBS_PER_BANK:
        if len(orbs) % 3 == 0:
            orbs.append(_orb(bank, pk, Orb.Status.SUPERSEDED, lineage=pk, revision=1, supersedes=None, rng=rng))
            orbs.append(_orb(bank, pk + 1, rng.choice(STATUSES), lineage=pk, revision=2, supersedes=pk, rng=rng))
            pk += 2
        else:
            orbs.append(_orb(bank, pk, rng.choice(STATUSES), lineage=pk, revision=1, supersedes=None, rng=rng))
            pk += 1
    return orbs


@pytest.fixture
def corpus(db):
    """Two workspaces with two banks each; every bank keeps the default approved-only policy."""
    rng = random.Random(20)
    default = Workspace.objects.get(pk=default_workspace_id())
    other = Workspace.objects.create(slug="other", name="Other team")
    banks = [bank_get_or_create(name=f"{workspace.slug} bank {n}", workspace=workspace)
             for workspace in (default, other) for n in (1, 2)]
    orbs = [orb for n, bank in enumerate(banks) for orb in _bank_orbs(bank, 10_000_000 + 1000 * n, rng)]
    Orb.objects.bulk_create(orbs)
    assert {orb.status for orb in orbs} >= {*STATUSES, Orb.Status.SUPERSEDED}
    return {"workspaces": [default, other], "banks": banks, "orbs": {orb.pk: orb for orb in orbs}, "rng": rng}


def _pool_create(rng) -> None:
    dimension = DIMENSIONS[settings.EMBEDDING_MODEL]
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE retrieval_pool (i int PRIMARY KEY, v vector({dimension})) ON COMMIT DROP")
        cursor.execute("INSERT INTO retrieval_pool SELECT i, v::vector FROM unnest(%s::int[], %s::text[]) AS t(i, v)",
                       [list(range(POOL)), [str(_unit(rng, dimension)) for _ in range(POOL)]])


def _service_sql(bank: MemoryBank, approved_only: bool, domain: str | None, k: int) -> tuple[str, list]:
    """The retrieval's SQL as the service builds it, with its query vector's parameter replaced by
    the pool's column `pool.v` (found by a sentinel vector no other parameter can equal)."""
    sentinel = [0.5] + [0.0] * (bank.embedding_dimension - 1)
    queryset = orbs_retrievable(bank=bank, approved_only=approved_only, domain=domain)
    sql, params = vectors_exact_query(queryset=queryset, vector=sentinel, k=k).values_list("pk").query.sql_with_params()
    vector_at = [n for n, param in enumerate(params) if _is_sentinel(param, sentinel)]
    assert len(vector_at) == 1, params
    pieces = re.split(r"(?<!%)%s", sql)
    inlined = "".join(piece + ("pool.v" if n == vector_at[0] else "%s" if n < len(params) else "")
                      for n, piece in enumerate(pieces))
    return inlined, [param for n, param in enumerate(params) if n != vector_at[0]]


def _is_sentinel(param, sentinel) -> bool:
    try:
        return list(param) == sentinel or str(param).replace(" ", "") == str(sentinel).replace(" ", "")
    except TypeError:
        return False


def _served(bank, approved_only: bool, domain: str | None, k: int, requests: list[tuple[int, int]]) -> dict:
    """Served Orb ids per request number, for `requests` [(request number, pool index)], in one round trip."""
    inner, params = _service_sql(bank, approved_only, domain, k)
    numbers, pool_rows = zip(*requests)
    sql = (f"SELECT req.n, r.id FROM unnest(%s::int[], %s::int[]) AS req(n, p) "
           f"JOIN retrieval_pool pool ON pool.i = req.p CROSS JOIN LATERAL ({inner}) AS r(id)")
    served = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(numbers), list(pool_rows), *params])
        for number, orb_id in cursor.fetchall():
            served[number].append(orb_id)
    return served


def _random_requests(corpus) -> dict:
    """(asking workspace, bank slug, approved_only, domain, k) -> [(request number, pool index)]."""
    rng, slugs = corpus["rng"], [bank.slug for bank in corpus["banks"]]
    groups = defaultdict(list)
    for number in range(RETRIEVALS):
        key = (rng.randrange(2), rng.choice(slugs), rng.random() < 0.5, rng.choice([None, *DOMAINS]), rng.choice(KS))
        groups[key].append((number, rng.randrange(POOL)))
    return groups


def _resolved(workspace, slug):
    try:
        return bank_resolve(slug, workspace=workspace)
    except MemoryBank.DoesNotExist:
        return None


def test_it_serves_no_unapproved_superseded_or_foreign_memory_in_1e5_random_retrievals(corpus):
    _pool_create(corpus["rng"])
    workspaces, orbs = corpus["workspaces"], corpus["orbs"]
    served_total, refused, violations = 0, 0, []
    for (asker, slug, approved_only, domain, k), requests in _random_requests(corpus).items():
        bank = _resolved(workspaces[asker], slug)
        if bank is None:  # another workspace's bank: the routes answer 404, nothing is searched
            refused += len(requests)
            continue
        for number, served_ids in _served(bank, approved_only, domain, k, requests).items():
            served_total += len(served_ids)
            violations += [(number, orbs[i].status, orbs[i].bank.workspace_id) for i in served_ids
                           if orbs[i].status != SERVABLE or orbs[i].bank.workspace_id != workspaces[asker].pk
                           or (domain and orbs[i].domain != domain)]
    assert not violations, violations[:10]
    # Not vacuous: about half the retrievals asked for another workspace's bank and were refused,
    # and the others were served memories.
    assert 0.4 * RETRIEVALS < refused < 0.6 * RETRIEVALS and served_total > RETRIEVALS // 4
