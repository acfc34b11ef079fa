"""Retrieval benchmark for Orbs: HNSW top-5 latency and recall at 10k / 100k / 1M Orbs.

    MEMWEB_DATA_DIR=/tmp/mw-bench python -m bench.orbs_retrieval --sizes 10000 100000 1000000

Fills one dedicated bank with synthetic Orbs whose vectors are generated directly
(clustered unit vectors with a shared offset, like sentence embeddings), so the
embedder is not the bottleneck. Rows go in with binary COPY; the HNSW index is
dropped before a load and rebuilt after it (the fast way to bulk-load), with the
build time reported. Per size it reports:

- insert throughput by COPY (no embedding);
- HNSW build time for the m / ef_construction in orbs/models.py, of a halfvec index (memweb's)
  or, with --index vector, of the full-precision one;
- top-5 latency p50/p95, database only, for several hnsw.ef_search values, with
  the service's exact query shape (bank + approved-only filters, iterative scan);
- recall@5 of each against the exact top-5 of the same filters, computed in memory (numpy)
  from the stored vectors;
- with --service-ef-search, the same through the service's own search
  (orbs.services.search.vectors_nearest), and with --worst-case, filters matching 0, 1, 10 and
  2,500 rows, through the service and with the index forced;
and once, on the loaded bank: insert throughput with embedding (real embedder,
batched) and through the whole ingest service, and end-to-end `orbs_retrieve`
latency (offline rewriter, real embedder, search, retrieval log).

It rebuilds the Orb index, so it refuses the checkout's own data folder: point
MEMWEB_DATA_DIR at a scratch folder. Never run by the tests.
"""
import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime

import numpy as np

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
os.environ.setdefault("TQDM_DISABLE", "1")  # no embedding progress bars between the figures

import django  # noqa: E402

django.setup()

from memweb.embedded_db import ensure_configured  # noqa: E402

EMBEDDED_DB_STARTED_HERE = ensure_configured()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from pgvector.psycopg import register_vector  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from memweb.embeddings import DIMENSIONS, MINILM, embedder  # noqa: E402
from orbs.models import (  # noqa: E402
    HNSW_EF_CONSTRUCTION,
    HNSW_EF_SEARCH,
    HNSW_M,
    MemoryBank,
    Orb,
    content_hash_of,
)

BANK = "bench: synthetic retrieval"
VECTOR_DIMENSIONS = DIMENSIONS[MINILM]  # the synthetic vectors are shaped like all-MiniLM-L6-v2's
APPROVED_SHARE = 0.9
N_CENTRES = 2000  # situations; how often each comes up follows a long-tailed popularity
INTRINSIC_DIMS = 24  # a situation's paraphrases vary along a few directions of their own
WITHIN = 0.6  # spread along them: two paraphrases sit near cosine 0.7
JITTER = 0.15  # plus a little noise in every direction
SHARED_OFFSET = 0.5  # sentence embeddings share a direction: unrelated ones sit near cosine 0.2
# Each row is the first revision of its Orb: its own lineage (ids drawn before the COPY), revision 1.
COLUMNS = (
    "id", "lineage_id", "revision",
    "bank_id", "content_hash", "obs", "emotion", "outcome", "context", "timestamp", "customer_key", "domain",
    "source", "source_label", "episode_ref", "status", "review_note", "vector", "embedding_model",
    "emotion_backend", "reflector_backend", "backend_error", "times_retrieved", "version", "created_at", "flag_note",
)
COPY_SQL = f"COPY orbs_orb ({', '.join(COLUMNS)}) FROM STDIN WITH (FORMAT BINARY)"
TYPES = (
    "int8", "int8", "int4",
    "int8", "text", "text", "text", "text", "jsonb", "timestamptz", "text", "text", "text", "text", "text", "text",
    "text", "vector", "text", "text", "text", "text", "int4", "int4", "timestamptz", "text",
)
# The index of 384-d rows, by the type it stores: full-precision `vector` (memweb before issue 17)
# or `halfvec` (16-bit floats, half the size; what memweb/vectors.py builds now). Each searches by
# its own expression, so the planner walks that index.
INDEXES = {
    "vector": ("orb_vector_384_hnsw", "vector::vector(384)", "%s"),
    "halfvec": ("orb_vector_half384", "vector::halfvec(384)", "%s::halfvec(384)"),
}
FILTER_SQL = "bank_id = %s AND status = 'approved' AND embedding_model = %s AND vector_dims(vector) = 384"


def index_name(kind: str) -> str:
    return INDEXES[kind][0]


def search_sql(kind: str, *, k: int = 5) -> str:
    _, expression, parameter = INDEXES[kind]
    return f"SELECT id FROM orbs_orb WHERE {FILTER_SQL} ORDER BY {expression} <=> {parameter} LIMIT {k}"


def index_sql(kind: str, *, m: int, ef_construction: int) -> str:
    name, expression, _ = INDEXES[kind]
    return (f"CREATE INDEX {name} ON orbs_orb USING hnsw (({expression}) {kind}_cosine_ops) "
            f"WITH (m = {m}, ef_construction = {ef_construction}) WHERE vector_dims(vector) = 384")


SENTENCES = [
    "My {item} arrived broken and I want to return it.",
    "The {item} I ordered is two weeks late, where is it?",
    "Can I exchange the {item} for a bigger size?",
    "The {item} stopped working after three days.",
    "I was charged twice for the {item}.",
    "Is the {item} in stock in blue?",
]
ITEMS = ["dishwasher", "washing machine", "fridge", "jacket", "pair of jeans", "kettle", "vacuum", "sweater"]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


class Data:
    """Clustered unit vectors shaped like sentence embeddings. Each chunk has its own seed,
    so a later run can append to a bank without regenerating what is stored."""

    def __init__(self, seed: int = 7):
        rng = np.random.default_rng(seed)
        shared = _unit(rng.standard_normal(VECTOR_DIMENSIONS))
        spread = rng.standard_normal((N_CENTRES, VECTOR_DIMENSIONS)) / np.sqrt(VECTOR_DIMENSIONS)
        self.centres = _unit(spread + SHARED_OFFSET * shared)
        shape = (N_CENTRES, INTRINSIC_DIMS, VECTOR_DIMENSIONS)
        self.bases = (rng.standard_normal(shape) / np.sqrt(VECTOR_DIMENSIONS)).astype(np.float32)
        weights = 1.0 / (np.arange(N_CENTRES) + 10.0) ** 0.8
        self.popularity = weights / weights.sum()

    def around_centres(self, n: int, *, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        picks = rng.choice(N_CENTRES, n, p=self.popularity)
        within = rng.standard_normal((n, INTRINSIC_DIMS)).astype(np.float32) * (WITHIN / np.sqrt(INTRINSIC_DIMS))
        jitter = rng.standard_normal((n, VECTOR_DIMENSIONS)) * (JITTER / np.sqrt(VECTOR_DIMENSIONS))
        vectors = self.centres[picks] + jitter
        for centre in np.unique(picks):
            rows = np.flatnonzero(picks == centre)
            vectors[rows] += within[rows] @ self.bases[centre]
        return _unit(vectors)


def say(text: str) -> None:
    print(text, flush=True)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def _raw():
    """Django's own psycopg connection, in autocommit (each statement its own transaction)."""
    connection.ensure_connection()
    raw = connection.connection
    register_vector(raw)
    raw.autocommit = True
    return raw


def _bank() -> MemoryBank:
    bank, _ = MemoryBank.objects.get_or_create(
        name=BANK, defaults={"slug": "bench-synthetic-retrieval", "embedding_model": embedder().model_name,
                             "approved_only": True},
    )
    return bank


def _row(bank_id: int, index: int, vector: np.ndarray, now: datetime, model: str) -> list:
    text = f"synthetic orb {index}"
    status = "approved" if (index * 7919) % 10 < APPROVED_SHARE * 10 else "pending"
    digest = content_hash_of(obs=text, emotion="neutral", outcome=f"{text} outcome")
    return [bank_id, digest, text, "neutral", f"{text} outcome", Jsonb({"reward": 1.0}), now, f"cust-{index % 5000}",
            "appliances" if index % 2 else "clothing", "episode", "bench", "", status, "", vector, model,
            "scripted", "scripted", "", 0, 1, now, ""]


def _copy(rows: list[list]) -> float:
    """Binary COPY of prepared rows; returns the seconds it took (drawing their ids excluded)."""
    raw = _raw()
    with raw.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence('orbs_orb', 'id')) FROM generate_series(1, %s)",
                       [len(rows)])
        ids = [orb_id for (orb_id,) in cursor.fetchall()]
    began = time.perf_counter()
    with raw.cursor() as cursor, cursor.copy(COPY_SQL) as copy:
        copy.set_types(list(TYPES))
        for orb_id, row in zip(ids, rows, strict=True):
            copy.write_row([orb_id, orb_id, 1, *row])
    return time.perf_counter() - began


def copy_rows(bank: MemoryBank, data: Data, start: int, stop: int, chunk: int = 50_000) -> float:
    """Append rows start..stop-1; returns seconds spent in COPY (generating the vectors excluded)."""
    now, spent = datetime.now(UTC), 0.0
    for begin in range(start, stop, chunk):
        end = min(begin + chunk, stop)
        vectors = data.around_centres(end - begin, seed=begin)
        rows = [_row(bank.pk, i, v, now, bank.embedding_model) for i, v in zip(range(begin, end), vectors, strict=True)]
        spent += _copy(rows)
    return spent


def rebuild_index(kind: str, *, m: int, ef_construction: int, maintenance_work_mem: str) -> float:
    """Build the HNSW index of `kind` (and only that one) in memory with one parallel worker (the
    second core); returns seconds."""
    drop_index()
    with _raw().cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        began = time.perf_counter()
        cursor.execute(index_sql(kind, m=m, ef_construction=ef_construction))
        built = time.perf_counter() - began
        cursor.execute("VACUUM ANALYZE orbs_orb")
    return built


def drop_index() -> None:
    with _raw().cursor() as cursor:
        for kind in INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {index_name(kind)}")


def _search(cursor, bank: MemoryBank, vector: np.ndarray, *, ef_search: int, exact: bool,
            kind: str = "vector") -> list[int]:
    cursor.execute("BEGIN")
    if exact:
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
    else:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
    cursor.execute(search_sql(kind), (bank.pk, bank.embedding_model, vector))
    ids = [row[0] for row in cursor.fetchall()]
    cursor.execute("COMMIT")
    return ids


def measure_search(bank: MemoryBank, queries: np.ndarray, truth: list[list[int]], ef_search: int,
                   kind: str) -> dict:
    latencies, recalls = [], []
    with _raw().cursor() as cursor:
        for vector in queries[:50]:  # warm the index pages into the OS cache
            _search(cursor, bank, vector, ef_search=ef_search, exact=False, kind=kind)
        for i, vector in enumerate(queries):
            began = time.perf_counter()
            ids = _search(cursor, bank, vector, ef_search=ef_search, exact=False, kind=kind)
            latencies.append((time.perf_counter() - began) * 1000)
            if i < len(truth):
                recalls.append(len(set(ids) & set(truth[i])) / 5)
    return {"ef_search": ef_search, "p50_ms": _percentile(latencies, 50), "p95_ms": _percentile(latencies, 95),
            "recall": f"recall@5 {statistics.fmean(recalls):.3f}" if recalls else "recall not measured"}


def _array(vector) -> np.ndarray:
    """A fetched vector as numpy (a named cursor gives pgvector's Vector, a plain one an array)."""
    return vector.to_numpy() if hasattr(vector, "to_numpy") else np.asarray(vector)


def exact_truth(bank: MemoryBank, queries: np.ndarray) -> tuple[list[list[int]], float]:
    """The true top-5 of each query among the bank's approved 384-d rows: every stored vector read
    once, then compared in memory (numpy), which is much cheaper than one sequential scan per query
    when the machine is shared. Returns the truth and the seconds it took to read the vectors."""
    if not len(queries):
        return [], 0.0
    began, ids, chunks = time.perf_counter(), [], []
    raw = _raw()
    with raw.transaction(), raw.cursor(name="truth", binary=True) as cursor:
        cursor.execute(f"SELECT id, vector FROM orbs_orb WHERE {FILTER_SQL}", (bank.pk, bank.embedding_model))
        while rows := cursor.fetchmany(20_000):
            ids.extend(row[0] for row in rows)
            chunks.append(np.stack([_array(row[1]) for row in rows]).astype(np.float32))
    read_s = time.perf_counter() - began
    stored = _unit(np.concatenate(chunks))
    ids = np.asarray(ids)
    truth = []
    for vector in _unit(queries):
        similarity = stored @ vector
        best = np.argpartition(-similarity, 5)[:5]
        truth.append(ids[best[np.argsort(-similarity[best])]].tolist())
    return truth, read_s


def check_plan(bank: MemoryBank, vector: np.ndarray, kind: str) -> bool:
    with _raw().cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("EXPLAIN " + search_sql(kind), (bank.pk, bank.embedding_model, vector))
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("ROLLBACK")
    return index_name(kind) in plan


def _texts(n: int, offset: int) -> list[str]:
    return [SENTENCES[i % len(SENTENCES)].format(item=ITEMS[(i // 6) % len(ITEMS)]) + f" (case {offset + i})"
            for i in range(n)]


def measure_indexed_insert(bank: MemoryBank, data: Data, start: int, n: int) -> dict:
    """Orbs/s into the indexed table, with vectors given and with each document embedded
    by the real model (batched) first."""
    now = datetime.now(UTC)
    given = data.around_centres(n, seed=start)
    copy_given_s = _copy([_row(bank.pk, start + i, v, now, bank.embedding_model) for i, v in enumerate(given)])
    model = embedder()
    model.embed(["warm up"])
    began = time.perf_counter()
    vectors = model.embed(_texts(n, start + n))
    embed_s = time.perf_counter() - began
    copy_s = _copy([_row(bank.pk, start + n + i, v, now, bank.embedding_model) for i, v in enumerate(vectors)])
    return {"rows": n, "without_embedding_per_s": n / copy_given_s, "embed_s": embed_s, "copy_s": copy_s,
            "with_embedding_per_s": n / (embed_s + copy_s)}


def _fresh_offset() -> int:
    """Row numbers no earlier run used, so extra Orbs never repeat a stored hash."""
    return 20_000_000 + 10 * Orb.objects.count()


def measure_service_ingest(n: int, offset: int) -> dict:
    """Orbs/s through orb_from_episode: offline reflection, real embedding, near-duplicate check, audit."""
    from orbs.services import orb_from_episode

    bank = MemoryBank.objects.get(name=BANK)
    episodes = [
        {"task_id": f"bench-{i}", "domain": "appliances", "customer_key": f"c{i}",
         "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Let me check."}],
         "reward": 1.0, "success": True, "reward_breakdown": {"done": True}, "errors": [], "metadata": {"case": i}}
        for i, text in enumerate(_texts(n, offset))
    ]
    began = time.perf_counter()
    for episode in episodes:
        orb_from_episode(bank=bank, trajectory=episode, source_label="bench")
    seconds = time.perf_counter() - began
    return {"episodes": n, "seconds": seconds, "orbs_per_s": n / seconds}


def measure_end_to_end(n: int) -> dict:
    from orbs.services import orbs_retrieve

    bank = MemoryBank.objects.get(name=BANK)
    texts = _texts(n, 0)
    orbs_retrieve(bank=bank, query="warm up", context={})
    stages, totals = {"rewrite_ms": [], "embed_ms": [], "search_ms": []}, []
    for text in texts:
        began = time.perf_counter()
        result = orbs_retrieve(bank=bank, query=text, context={"domain": "appliances"}, client="bench")
        totals.append((time.perf_counter() - began) * 1000)
        log = bank.retrievals.get(pk=result.retrieval_id)
        for stage in stages:
            stages[stage].append(getattr(log, stage))
    report = {"queries": n, "p50_ms": _percentile(totals, 50), "p95_ms": _percentile(totals, 95)}
    report |= {f"{stage}_p50": _percentile(values, 50) for stage, values in stages.items()}
    return report


def load_size(bank: MemoryBank, data: Data, size: int, have: int, args) -> None:
    """Bring the bank from `have` to `size` Orbs: drop the index, COPY, rebuild the index."""
    drop_index()
    added = size - have
    copy_s = copy_rows(bank, data, have, size)
    say(f"COPY {added:,} rows: {copy_s:.1f} s ({added / copy_s:,.0f} rows/s, no embedding, no index)")
    build_s = rebuild_index(args.index, m=args.m, ef_construction=args.ef_construction,
                            maintenance_work_mem=args.maintenance_work_mem)
    say(f"HNSW build ({args.index}, m={args.m}, ef_construction={args.ef_construction}): {build_s:.1f} s")


def measure_size(bank: MemoryBank, data: Data, size: int, args) -> None:
    queries = data.around_centres(args.queries, seed=10**9 + size)  # not a seed of any stored chunk
    n_truth = min(args.recall_queries, args.queries)
    truth, read_s = exact_truth(bank, queries[:n_truth])
    if n_truth:
        say(f"ground truth: exact top-5 of {n_truth} queries in memory ({read_s:.0f} s to read the vectors)")
    say(f"planner uses the {args.index} HNSW index: {check_plan(bank, queries[0], args.index)}")
    for ef in args.ef_search:
        row = measure_search(bank, queries, truth, ef, args.index)
        say(f"ef_search={ef:>4}: p50 {row['p50_ms']:.2f} ms  p95 {row['p95_ms']:.2f} ms  {row['recall']}  "
            f"(load average {os.getloadavg()[0]:.2f})")
    for ef in args.service_ef_search:
        row = measure_service(bank, queries, truth, ef)
        say(f"service search, ef_search={ef:>4}: p50 {row['p50_ms']:.2f} ms  p95 {row['p95_ms']:.2f} ms  "
            f"p99 {row['p99_ms']:.2f} ms  {row['recall']}  (load average {os.getloadavg()[0]:.2f})")
    if args.worst_case:
        measure_worst_case(bank, data, args.worst_case)


def _service_search(bank: MemoryBank, vector: np.ndarray, customer_key: str | None = None) -> list[int]:
    from orbs.services import orbs_retrievable
    from orbs.services.search import vectors_nearest

    queryset = orbs_retrievable(bank=bank, approved_only=True, customer_key=customer_key)
    return [orb.pk for orb, _ in vectors_nearest(queryset=queryset, vector=list(vector), k=5)]


def measure_service(bank: MemoryBank, queries: np.ndarray, truth: list[list[int]], ef_search: int) -> dict:
    """Top-5 through the service's own search (orbs.services.search.vectors_nearest: capped count,
    then the halfvec index or an exact scan, Django ORM included), with its ef_search set to `ef_search`."""
    from orbs.services import search

    search.HNSW_EF_SEARCH = ef_search
    latencies, recalls = [], []
    for vector in queries[:50]:
        _service_search(bank, vector)
    for i, vector in enumerate(queries):
        began = time.perf_counter()
        ids = _service_search(bank, vector)
        latencies.append((time.perf_counter() - began) * 1000)
        if i < len(truth):
            recalls.append(len(set(ids) & set(truth[i])) / 5)
    return {"p50_ms": _percentile(latencies, 50), "p95_ms": _percentile(latencies, 95),
            "p99_ms": _percentile(latencies, 99),
            "recall": f"recall@5 {statistics.fmean(recalls):.3f}" if recalls else "recall not measured"}


RARE_CUSTOMERS = {"bench-rare-0": 0, "bench-rare-1": 1, "bench-rare-10": 10, "bench-rare-2500": 2500}


def _ensure_rare_customers(bank: MemoryBank, data: Data) -> None:
    """Customers owning 0, 1, 10 and 2,500 approved Orbs of the bank (added once, into the indexed table)."""
    now, offset = datetime.now(UTC), 30_000_000
    for customer, count in RARE_CUSTOMERS.items():
        have = Orb.objects.filter(bank=bank, customer_key=customer).count()
        if count and not have:
            vectors = data.around_centres(count, seed=offset)
            rows = [_row(bank.pk, offset + i, v, now, bank.embedding_model) for i, v in enumerate(vectors)]
            for row in rows:
                row[COLUMNS.index("customer_key")] = customer
                row[COLUMNS.index("status")] = "approved"
            _copy(rows)
        offset += 1_000_000
    with _raw().cursor() as cursor:
        cursor.execute("ANALYZE orbs_orb")


def _forced_index_search(cursor, bank: MemoryBank, vector: np.ndarray, customer: str, max_scan_tuples: int) -> None:
    """The filtered query answered from the halfvec index whatever the planner would rather do
    (sorting forbidden): what the search did before it counted the filtered rows first."""
    cursor.execute("BEGIN")
    cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    cursor.execute(f"SET LOCAL hnsw.ef_search = {int(HNSW_EF_SEARCH)}")
    cursor.execute(f"SET LOCAL hnsw.max_scan_tuples = {int(max_scan_tuples)}")
    cursor.execute("SET LOCAL enable_sort = off")
    sql = search_sql("halfvec").replace("WHERE ", "WHERE customer_key = %s AND ")
    cursor.execute(sql, (customer, bank.pk, bank.embedding_model, vector))
    cursor.fetchall()
    cursor.execute("COMMIT")


def measure_worst_case(bank: MemoryBank, data: Data, n: int) -> None:
    """p50 / p99 of filtered top-5 when the filter (a customer) matches 0, 1, 10 or 2,500 rows."""
    from orbs.services.search import HNSW_MAX_SCAN_TUPLES

    _ensure_rare_customers(bank, data)
    queries = data.around_centres(n, seed=10**9 + 7)
    for customer, count in RARE_CUSTOMERS.items():
        service = []
        for vector in queries:
            began = time.perf_counter()
            _service_search(bank, vector, customer_key=customer)
            service.append((time.perf_counter() - began) * 1000)
        line = (f"filter matching {count:>5,} rows: service p50 {_percentile(service, 50):6.2f} ms "
                f"p99 {_percentile(service, 99):6.2f} ms")
        for cap in (HNSW_MAX_SCAN_TUPLES, 20_000):
            forced = []
            with _raw().cursor() as cursor:
                for vector in queries[:max(20, n // 5)]:
                    began = time.perf_counter()
                    _forced_index_search(cursor, bank, vector, customer, cap)
                    forced.append((time.perf_counter() - began) * 1000)
            line += (f" | index forced, max_scan_tuples {cap:,}: p50 {_percentile(forced, 50):6.1f} ms "
                     f"p99 {_percentile(forced, 99):6.1f} ms")
        say(f"{line}  (load average {os.getloadavg()[0]:.2f})")


def _refuse_project_data() -> None:
    project_data = os.path.realpath(settings.BASE_DIR / ".data")
    if settings.USES_EMBEDDED_DB and os.path.realpath(settings.DATA_DIR) == project_data:
        sys.exit("This benchmark rebuilds the Orb index: set MEMWEB_DATA_DIR to a scratch folder, e.g. /tmp/mw-bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=1000, help="latency queries per size and ef_search")
    parser.add_argument("--recall-queries", type=int, default=200, help="queries checked against an exact scan")
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 64, 100, 200])
    parser.add_argument("--index", choices=list(INDEXES), default="halfvec",
                        help="what the HNSW index stores: halfvec (memweb's index) or full-precision vector")
    parser.add_argument("--service-ef-search", type=int, nargs="*", default=[HNSW_EF_SEARCH],
                        help="ef_search values to time the service's own search with (orbs.services.search)")
    parser.add_argument("--worst-case", type=int, default=200,
                        help="queries per selective filter (customers of 0, 1, 10, 2,500 Orbs); 0 to skip")
    parser.add_argument("--m", type=int, default=HNSW_M)
    parser.add_argument("--ef-construction", type=int, default=HNSW_EF_CONSTRUCTION)
    parser.add_argument("--maintenance-work-mem", default="6GB")
    parser.add_argument("--measure-existing", action="store_true",
                        help="measure a size the bank already reached instead of skipping it")
    parser.add_argument("--rebuild-index", action="store_true",
                        help="with --measure-existing: rebuild the index with --m / --ef-construction first")
    parser.add_argument("--end-to-end", type=int, default=200, help="orbs_retrieve calls (0 to skip)")
    parser.add_argument("--ingest", type=int, default=50, help="episodes through orb_from_episode (0 to skip)")
    parser.add_argument("--indexed-insert", type=int, default=2000,
                        help="Orbs copied into the indexed table, with and without embedding (0 to skip)")
    args = parser.parse_args()
    _refuse_project_data()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    say(f"PostgreSQL data: {settings.DATA_DIR}; {os.cpu_count()} CPUs; embedder {embedder().model_name}; "
          f"the service searches with hnsw.ef_search={HNSW_EF_SEARCH}")
    bank = _bank()
    have = Orb.objects.filter(bank=bank).count()
    data = Data()
    for size in sorted(args.sizes):
        say(f"\n== {size:,} Orbs ==  (load average {os.getloadavg()[0]:.2f}: other processes share the 2 cores)")
        if size > have:
            load_size(bank, data, size, have, args)
            have = size
        elif args.measure_existing:
            say(f"measuring the stored bank as it is: {Orb.objects.filter(bank=bank).count():,} Orbs")
            if args.rebuild_index:
                build_s = rebuild_index(args.index, m=args.m, ef_construction=args.ef_construction,
                                        maintenance_work_mem=args.maintenance_work_mem)
                say(f"HNSW rebuild ({args.index}, m={args.m}, ef_construction={args.ef_construction}): {build_s:.1f} s")
        else:
            say(f"skipped: the bank already holds {have:,} Orbs (--measure-existing measures it as it is)")
            continue
        measure_size(bank, data, size, args)
    if args.indexed_insert:
        row = measure_indexed_insert(bank, data, _fresh_offset(), args.indexed_insert)
        say(f"\ninsert into the indexed bank, {row['rows']} Orbs: {row['without_embedding_per_s']:.0f} Orbs/s with "
            f"vectors given; {row['with_embedding_per_s']:.0f} Orbs/s embedding each document "
            f"(embed {row['embed_s']:.1f} s, COPY {row['copy_s']:.1f} s)")
    if args.ingest:
        row = measure_service_ingest(args.ingest, _fresh_offset())
        say(f"orb_from_episode, one episode at a time: {row['orbs_per_s']:.1f} Orbs/s over {row['episodes']}")
    if args.end_to_end:
        row = measure_end_to_end(args.end_to_end)
        say(f"orbs_retrieve end to end: p50 {row['p50_ms']:.1f} ms  p95 {row['p95_ms']:.1f} ms  (stages p50: rewrite "
              f"{row['rewrite_ms_p50']:.2f}, embed {row['embed_ms_p50']:.1f}, search {row['search_ms_p50']:.1f} ms)")
    say(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
