"""memweb against two peers, Mem0 and Chroma: same corpus, same all-MiniLM-L6-v2 weights, one run.

    MEMWEB_DATA_DIR=/tmp/mw-bench-peers /work/peers-venv/bin/python -m bench.peers --size 100000

The peers are benchmark-only dependencies (requirements-bench.txt, installed in a venv of their
own): this module is the only place that imports them, and no test imports it.

- memweb: its own services. Search is `vectors_nearest` over `orbs_retrievable` (bank +
  approved-only, pgvector HNSW with iterative scan); a text query is `orbs_search` (embed, then
  the same search). A single add is `orb_remember` (embed, near-duplicate check, insert, audit
  event). memweb has no batched-add service, so "batched" is the embedder's batch call plus one
  bulk INSERT of the Orb rows (no near-duplicate check, no audit event).
- Mem0 (mem0ai, open-source `Memory`): infer=False, so no LLM is called (its LLM config holds a
  dummy key it never uses); its Hugging Face embedder on the local MiniLM folder; its pgvector
  store on the same embedded PostgreSQL (its own table, its own HNSW index). Filters are
  user_id = bank and metadata status = approved. Vector search is its store's `search`;
  a text query is `Memory.search` (which also runs its keyword scoring).
- Chroma (chromadb): a persistent client in the scratch folder, cosine space, a
  SentenceTransformer embedding function on the same MiniLM folder, `where` bank and status.

The search corpus (synthetic Orb-like lessons, generated deterministically) is embedded once
with MiniLM (cached in the scratch folder) and loaded into each store by its fastest supported
path: memweb by binary COPY and one HNSW build, Mem0 through its vector store's `insert`
(batches into its indexed table), Chroma by `add` with embeddings given. The same query vectors
go to all three; recall@5 is against an exact numpy search over the filtered corpus. The add
part then lets each system embed its own text into its loaded store, one memory per call and
in batches. Queries and adds alternate between the systems so that the shared machine's load
falls on all three alike; the load average is printed beside every figure.

Telemetry of both peers is off and model hubs are offline. It writes Orbs, so it refuses the
checkout's own data folder: point MEMWEB_DATA_DIR at a scratch folder. Never run by the tests.
"""
import argparse
import hashlib
import logging
import os
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import numpy as np

# Before any peer is imported: no telemetry, no model hub.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from bench.figures import record  # noqa: E402
from bench.orbs_retrieval import (  # noqa: E402  (sets Django up and starts the scratch PostgreSQL)
    EMBEDDED_DB_STARTED_HERE,
    Data,
    _copy,
    _percentile,
    _refuse_project_data,
    drop_index,
    rebuild_index,
    say,
)
from memweb.embeddings import MINILM, embedder, model_weights_path  # noqa: E402
from orbs.models import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_M, Orb, orb_document, orb_ids_draw  # noqa: E402
from orbs.services import bank_get_or_create, orb_remember, orbs_retrievable, orbs_search  # noqa: E402
from orbs.services.ingest import REMEMBERED_EMOTION, REMEMBERED_OBS  # noqa: E402
from orbs.services.search import vectors_nearest  # noqa: E402

K = 5
BANKS = ("peers-support", "peers-returns")  # 75% / 25% of the corpus; queries filter on the first
APPROVED_SHARE = 0.9
MEM0_TABLE = "mem0_peers"
CHROMA_COLLECTION = "peers"
SYSTEMS = ("memweb", "mem0", "chroma")

OPENERS = ["A customer wrote that", "The caller said", "In chat, a shopper reported that", "By email, a buyer said",
           "On the phone, a customer explained that", "A returning customer complained that",
           "A first-time buyer mentioned that", "An angry customer insisted that", "A polite customer asked because",
           "A business customer reported that"]
PROBLEMS = ["the {item} arrived with a cracked {part}", "the {item} went to the wrong address",
            "the {item} stopped working after {n} days", "they were charged twice for the {item}",
            "the {item} is {n} days late", "the {item} came in the wrong colour", "the {item} was missing its {part}",
            "the warranty claim for the {item} was refused", "the refund for the {item} never arrived",
            "the {item} is too small and they want a bigger size", "the {item} makes a loud noise from the {part}",
            "the {item} was cheaper elsewhere {n} days later", "the {item} leaks near the {part}",
            "the courier left the {item} in the rain", "the {item} manual is missing pages about the {part}",
            "the {item} was opened and used before delivery"]
LESSONS = ["offering a free replacement calmed them down", "apologising first, then sending the tracking link, worked",
           "escalating to a supervisor made them angrier", "a partial refund of {pct}% settled it",
           "asking for a photo before promising anything avoided a dispute",
           "explaining the {n}-day return window clearly ended the chat quickly",
           "sending a spare {part} by express post solved it", "booking a technician visit kept them as a customer",
           "quoting the policy word for word backfired", "a discount code of {pct}% for the next order helped",
           "checking the order history first saved a second contact", "they only wanted an apology, not money",
           "switching to a phone call resolved it faster than chat", "promising a call back and keeping it won trust",
           "a store credit instead of cash was accepted", "pointing to the self-service return page was enough"]
ITEMS = ["dishwasher", "washing machine", "fridge", "jacket", "pair of jeans", "kettle", "vacuum cleaner", "sweater",
         "toaster", "microwave", "laptop", "phone case", "coffee machine", "blender", "winter coat", "pair of boots",
         "desk lamp", "office chair", "mattress", "sofa", "tumble dryer", "air fryer", "electric toothbrush",
         "hair dryer", "television", "soundbar", "router", "printer", "bicycle", "tent", "backpack", "wristwatch",
         "pair of sunglasses", "baby stroller", "car seat", "gaming console", "smart speaker", "rice cooker",
         "standing desk", "duvet"]
PARTS = ["door", "handle", "lid", "hose", "cable", "plug", "zip", "button", "screen", "filter", "wheel", "seal"]
ASKS = ["What worked when {problem}?", "Customer says {problem}. How did we handle this before?",
        "{problem} - any lessons?", "How should I answer when {problem}?"]


logging.getLogger("mem0").setLevel(logging.WARNING)  # one INFO line per inserted memory otherwise


def load_average() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# --- the corpus ---------------------------------------------------------------------------------

def _fill(template: str, rng: np.random.Generator) -> str:
    return template.format(item=ITEMS[rng.integers(len(ITEMS))], part=PARTS[rng.integers(len(PARTS))],
                           n=int(rng.integers(2, 31)), pct=int(rng.choice([5, 10, 15, 20, 25, 30, 50])))


def lessons(n: int, *, seed: int) -> list[str]:
    """n distinct Orb-like lessons: who reported what, and what worked."""
    rng, seen, texts = np.random.default_rng(seed), set(), []
    while len(texts) < n:
        opener = OPENERS[rng.integers(len(OPENERS))]
        problem = _fill(PROBLEMS[rng.integers(len(PROBLEMS))], rng)
        text = f"{opener} {problem}; {_fill(LESSONS[rng.integers(len(LESSONS))], rng)}."
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def questions(n: int, *, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [ASKS[rng.integers(len(ASKS))].format(problem=_fill(PROBLEMS[rng.integers(len(PROBLEMS))], rng))
            for _ in range(n)]


class Corpus:
    """Texts, their bank and status, and their vectors: the first `real` texts embedded once with
    MiniLM (cached on disk), the rest synthetic unit vectors shaped like sentence embeddings
    (bench.orbs_retrieval's clustered generator), used where embedding every row would not fit
    the time on a shared 2-core machine. Every system stores the same vectors."""

    def __init__(self, size: int, real: int, seed: int = 17):
        self.texts = lessons(size, seed=seed)
        rng = np.random.default_rng(seed + 1)
        self.banks = np.where(rng.random(size) < 0.75, BANKS[0], BANKS[1])
        self.approved = rng.random(size) < APPROVED_SHARE
        real = min(real, size)
        cache = Path(settings.DATA_DIR) / f"peers-corpus-{real}-{seed}.npy"
        if cache.exists():
            embedded = np.load(cache)
        else:
            began = time.perf_counter()
            embedded = embedder().embed(self.texts[:real])
            say(f"embedded {real:,} corpus texts once in {time.perf_counter() - began:.0f} s ({load_average()})")
            np.save(cache, embedded)
        synthetic = Data(seed=seed).around_centres(size - real, seed=seed) if size > real else embedded[:0]
        self.vectors = np.vstack([embedded, synthetic]).astype(np.float32)

    def status(self, i: int) -> str:
        return "approved" if self.approved[i] else "pending"

    def exact_top(self, queries: np.ndarray) -> list[set[int]]:
        """The true top-k of each query among the queried bank's approved rows (numpy, exact)."""
        allowed = np.flatnonzero((self.banks == BANKS[0]) & self.approved)
        scores = queries @ self.vectors[allowed].T
        top = np.argpartition(-scores, K, axis=1)[:, :K]
        return [set(allowed[row].tolist()) for row in top]


# --- memweb -------------------------------------------------------------------------------------

class Memweb:
    name = "memweb"

    def __init__(self, corpus: Corpus, run: str):
        self.banks = {name: bank_get_or_create(name=name, approved_only=True) for name in BANKS}
        self.add_bank = bank_get_or_create(name=f"peers-adds-{run}", approved_only=True)
        self.corpus = corpus

    def stored(self) -> int:
        return Orb.objects.filter(bank__in=self.banks.values()).count()

    def load(self) -> float:
        """Binary COPY of the corpus into the table without its HNSW index, then one build with the
        product's parameters (the fast way to bulk-load); returns seconds."""
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM orbs_orb WHERE bank_id = ANY(%s)", [[b.pk for b in self.banks.values()]])
        drop_index()
        now, rows, c = datetime.now(UTC), [], self.corpus
        for i, text in enumerate(c.texts):
            bank = self.banks[c.banks[i]]
            digest = bank.orb_hash(obs=REMEMBERED_OBS, emotion=REMEMBERED_EMOTION, outcome=text, customer_key="")
            rows.append([bank.pk, digest, REMEMBERED_OBS, REMEMBERED_EMOTION, text, Jsonb({}), now, "", "",
                         "remembered", "peers", f"corpus-{i}", c.status(i), "", c.vectors[i], bank.embedding_model,
                         "scripted", "scripted", "", 0, 1, now, ""])
        began = time.perf_counter()
        _copy(rows)
        rebuild_index("halfvec", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION, maintenance_work_mem="1GB")  # memweb's own index
        return time.perf_counter() - began

    def _ids(self, pairs) -> list[int]:
        return [int(orb.episode_ref.removeprefix("corpus-")) for orb, _ in pairs]

    def search_vector(self, vector: np.ndarray) -> list[int]:
        retrievable = orbs_retrievable(bank=self.banks[BANKS[0]], approved_only=True)
        return self._ids(vectors_nearest(queryset=retrievable, vector=vector.tolist(), k=K))

    def search_text(self, text: str) -> list[int]:
        retrievable = orbs_retrievable(bank=self.banks[BANKS[0]], approved_only=True)
        return self._ids(orbs_search(text=text, queryset=retrievable, limit=K))

    def add_one(self, text: str) -> None:
        orb_remember(bank=self.add_bank, text=text, source_label="peers")

    def add_batch(self, texts: list[str]) -> None:
        bank, model = self.add_bank, embedder()
        documents = [orb_document(obs=REMEMBERED_OBS, emotion=REMEMBERED_EMOTION, outcome=t, context={}) for t in texts]
        vectors = model.embed(documents)
        Orb.objects.bulk_create([  # bulk_create skips Orb.save, which draws a first revision's id and lineage
            Orb(pk=orb_id, lineage_id=orb_id, bank=bank, content_hash=bank.orb_hash(
                obs=REMEMBERED_OBS, emotion=REMEMBERED_EMOTION, outcome=t, customer_key=""),
                obs=REMEMBERED_OBS, emotion=REMEMBERED_EMOTION, outcome=t, context={}, source="remembered",
                source_label="peers", vector=v, embedding_model=model.model_name)
            for t, v, orb_id in zip(texts, vectors, orb_ids_draw(len(texts)), strict=True)
        ])


# --- Mem0 ---------------------------------------------------------------------------------------

def _database_url() -> str:
    """The database Django uses (the scratch embedded PostgreSQL, on a Unix socket), for Mem0's pool."""
    return settings.DATABASE_URL


class Mem0:
    name = "mem0"

    def __init__(self, corpus: Corpus, run: str, weights: str):
        from mem0 import Memory

        self.memory = Memory.from_config({
            "vector_store": {"provider": "pgvector", "config": {
                "connection_string": _database_url(), "collection_name": MEM0_TABLE, "embedding_model_dims": 384,
                "hnsw": True}},
            "embedder": {"provider": "huggingface", "config": {
                "model": weights, "embedding_dims": 384, "model_kwargs": {"device": "cpu"}}},
            # infer=False never calls the LLM; the key only satisfies the config.
            "llm": {"provider": "openai", "config": {"api_key": "unused-infer-is-false", "model": "gpt-4o-mini"}},
            "history_db_path": str(Path(settings.DATA_DIR) / "mem0-history.db"),
        })
        self.store = self.memory.vector_store
        self.corpus, self.add_user = corpus, f"peers-adds-{run}"
        self.filters = {"user_id": BANKS[0], "status": "approved"}

    def stored(self) -> int:
        self.store._ensure_collection()
        with self.store._get_cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {MEM0_TABLE} WHERE payload->>'user_id' = ANY(%s)", [list(BANKS)])
            return cursor.fetchone()[0]

    def load(self, batch: int = 1000) -> float:
        """Through the store's own insert, in batches, into its table without the HNSW index; then its
        own create_col() builds that index (the same definition as when it is created first, built
        in bulk: inserting 100k rows into the indexed table ran at ~75 rows/s here). Returns seconds."""
        with self.store._get_cursor(commit=True) as cursor:
            cursor.execute(f"DELETE FROM {MEM0_TABLE} WHERE payload->>'user_id' = ANY(%s)", [list(BANKS)])
            cursor.execute(f"DROP INDEX IF EXISTS {MEM0_TABLE}_hnsw_idx")
        c, now = self.corpus, datetime.now(UTC).isoformat()
        began = time.perf_counter()
        for start in range(0, len(c.texts), batch):
            rows = range(start, min(start + batch, len(c.texts)))
            payloads = [{"data": c.texts[i], "hash": hashlib.md5(c.texts[i].encode()).hexdigest(),
                         "created_at": now, "updated_at": now, "text_lemmatized": c.texts[i],
                         "user_id": str(c.banks[i]), "role": "user", "status": c.status(i), "corpus": i} for i in rows]
            self.store.insert(vectors=[c.vectors[i].tolist() for i in rows], payloads=payloads,
                              ids=[str(uuid.uuid5(uuid.NAMESPACE_OID, f"corpus-{i}")) for i in rows])
        with self.store.connection_pool.connection() as pooled:
            # The graph fits in memory, as for memweb's build (the pool has one connection here).
            pooled.execute("SET maintenance_work_mem = '1GB'")
        self.store.create_col()
        return time.perf_counter() - began

    def search_vector(self, vector: np.ndarray) -> list[int]:
        hits = self.store.search(query="", vectors=vector.tolist(), top_k=K, filters=self.filters)
        return [hit.payload["corpus"] for hit in hits]

    def search_text(self, text: str) -> list[int]:
        hits = self.memory.search(text, top_k=K, filters=self.filters)["results"]
        return [hit["metadata"]["corpus"] for hit in hits]

    def add_one(self, text: str) -> None:
        self.memory.add(text, user_id=self.add_user, metadata={"status": "approved", "corpus": -1}, infer=False)

    def add_batch(self, texts: list[str]) -> None:
        self.memory.add([{"role": "user", "content": t} for t in texts], user_id=self.add_user,
                        metadata={"status": "approved", "corpus": -1}, infer=False)


# --- Chroma -------------------------------------------------------------------------------------

class Chroma:
    name = "chroma"

    def __init__(self, corpus: Corpus, run: str, weights: str):
        import chromadb
        from chromadb.config import Settings
        from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

        self.client = chromadb.PersistentClient(path=str(Path(settings.DATA_DIR) / "chroma"),
                                                settings=Settings(anonymized_telemetry=False))
        function = SentenceTransformerEmbeddingFunction(model_name=weights, device="cpu", normalize_embeddings=True)
        self.collection = self.client.get_or_create_collection(
            CHROMA_COLLECTION, embedding_function=function, configuration={"hnsw": {"space": "cosine"}})
        self.corpus, self.add_bank, self.added = corpus, f"peers-adds-{run}", 0
        self.where = {"$and": [{"bank": BANKS[0]}, {"status": "approved"}]}

    def stored(self) -> int:
        return len(self.collection.get(where={"bank": {"$in": list(BANKS)}}, include=[])["ids"])

    def load(self) -> float:
        """add() with the embeddings given, in the client's largest batches; returns seconds."""
        self.client.delete_collection(CHROMA_COLLECTION)
        function = self.collection._embedding_function
        self.collection = self.client.create_collection(
            CHROMA_COLLECTION, embedding_function=function, configuration={"hnsw": {"space": "cosine"}})
        c, batch = self.corpus, self.client.get_max_batch_size()
        began = time.perf_counter()
        for start in range(0, len(c.texts), batch):
            rows = range(start, min(start + batch, len(c.texts)))
            self.collection.add(ids=[str(i) for i in rows], embeddings=c.vectors[start:rows.stop],
                                documents=[c.texts[i] for i in rows],
                                metadatas=[{"bank": str(c.banks[i]), "status": c.status(i)} for i in rows])
        return time.perf_counter() - began

    def _ids(self, result) -> list[int]:
        return [int(i) for i in result["ids"][0]]

    def search_vector(self, vector: np.ndarray) -> list[int]:
        return self._ids(self.collection.query(query_embeddings=[vector], n_results=K, where=self.where))

    def search_text(self, text: str) -> list[int]:
        return self._ids(self.collection.query(query_texts=[text], n_results=K, where=self.where))

    def _next_ids(self, n: int) -> list[str]:
        self.added += n
        return [f"{self.add_bank}-{i}" for i in range(self.added - n, self.added)]

    def add_one(self, text: str) -> None:
        self.collection.add(ids=self._next_ids(1), documents=[text],
                            metadatas=[{"bank": self.add_bank, "status": "approved"}])

    def add_batch(self, texts: list[str]) -> None:
        self.collection.add(ids=self._next_ids(len(texts)), documents=texts,
                            metadatas=[{"bank": self.add_bank, "status": "approved"}] * len(texts))


# --- measuring ----------------------------------------------------------------------------------

def timed(call: Callable, *args) -> tuple[float, object]:
    began = time.perf_counter()
    result = call(*args)
    return (time.perf_counter() - began) * 1000, result


def measure_search(systems: list, items: list, truth: list[set[int]], layer: str) -> dict:
    """Each query goes to every system in turn, so a change of load hits all of them."""
    latencies = {s.name: [] for s in systems}
    recalls = {s.name: [] for s in systems}
    for s in systems:  # warm caches, connections and models
        for item in items[:20]:
            getattr(s, f"search_{layer}")(item)
    for item, true in zip(items, truth, strict=True):
        for s in systems:
            ms, ids = timed(getattr(s, f"search_{layer}"), item)
            latencies[s.name].append(ms)
            recalls[s.name].append(len(set(ids) & true) / K)
    return {name: {"p50": _percentile(values, 50), "p95": _percentile(values, 95),
                   "recall": statistics.fmean(recalls[name])} for name, values in latencies.items()}


def measure_adds(systems: list, texts: list[str], batch: int, single: int) -> dict:
    """ms per memory: `single` memories one call each, the rest in calls of `batch`; systems alternate."""
    report = {s.name: {"single": [], "batched_ms": 0.0} for s in systems}
    for s in systems:  # a first add loads each embedder and creates whatever it creates lazily
        s.add_one("warm-up lesson: " + texts[0])
    for text in texts[1:single + 1]:
        for s in systems:
            report[s.name]["single"].append(timed(s.add_one, text)[0])
    rest = texts[single + 1:]
    for start in range(0, len(rest), batch):
        chunk = rest[start:start + batch]
        for s in systems:
            report[s.name]["batched_ms"] += timed(s.add_batch, chunk)[0]
    for row in report.values():
        row["batched_per_memory"] = row["batched_ms"] / max(1, len(rest))
    return report


def versions() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version'), extversion FROM pg_extension WHERE extname='vector'")
        postgres, pgvector = cursor.fetchone()
    return (f"mem0ai {version('mem0ai')}, chromadb {version('chromadb')}, PostgreSQL {postgres}, pgvector {pgvector}, "
            f"sentence-transformers {version('sentence-transformers')}, FlagEmbedding {version('FlagEmbedding')}, "
            f"torch {version('torch')}")


def ensure_loaded(system, size: int) -> None:
    stored = system.stored()
    if stored == size:
        say(f"{system.name}: the store already holds the {size:,} corpus rows")
        return
    seconds = system.load()
    say(f"{system.name}: loaded {size:,} rows in {seconds:.1f} s ({size / seconds:,.0f} rows/s)  ({load_average()})")


def print_search(title: str, rows: dict) -> None:
    say(f"\n{title}  ({load_average()})")
    say(f"{'system':<8} {'p50 ms':>8} {'p95 ms':>8} {'recall@5':>9}")
    for name, row in rows.items():
        say(f"{name:<8} {row['p50']:>8.2f} {row['p95']:>8.2f} {row['recall']:>9.3f}")


def print_adds(rows: dict, batch: int) -> None:
    say(f"\nadd, each system embedding its own text into its loaded store  ({load_average()})")
    say(f"{'system':<8} {'single p50 ms':>14} {'single p95 ms':>14} {'single /s':>10} "
        f"{f'batch of {batch}: ms/memory':>26} {'batched /s':>11}")
    for name, row in rows.items():
        single = row["single"]
        say(f"{name:<8} {_percentile(single, 50):>14.1f} {_percentile(single, 95):>14.1f} "
            f"{1000 / statistics.fmean(single):>10.1f} {row['batched_per_memory']:>26.2f} "
            f"{1000 / row['batched_per_memory']:>11.1f}")


def print_ratios(search: dict, text: dict, adds: dict) -> None:
    say(f"\nratios (memweb against each peer; above 1 means memweb is faster)  ({load_average()})")
    for peer in ("mem0", "chroma"):
        single = statistics.fmean(adds[peer]["single"]) / statistics.fmean(adds["memweb"]["single"])
        batched = adds[peer]["batched_per_memory"] / adds["memweb"]["batched_per_memory"]
        record(f"peers.add_single_vs_{peer}", single, "a peer's mean ms per add over memweb's")
        record(f"peers.add_batched_vs_{peer}", batched, "a peer's ms per memory batched over memweb's")
        record(f"peers.recall_{peer}", search[peer]["recall"], "recall@5, vector queries")
        record(f"peers.search_p50_vs_{peer}", search[peer]["p50"] / search["memweb"]["p50"], "vector search")
        say(f"vs {peer:<6}: vector search p50 x{search[peer]['p50'] / search['memweb']['p50']:.2f}, "
            f"p95 x{search[peer]['p95'] / search['memweb']['p95']:.2f}; text search p50 "
            f"x{text[peer]['p50'] / text['memweb']['p50']:.2f}; add throughput single x{single:.2f}, "
            f"batched x{batched:.2f}; recall@5 {search['memweb']['recall']:.3f} against {search[peer]['recall']:.3f}")


def stop_embedded_database() -> None:
    if EMBEDDED_DB_STARTED_HERE:
        from django.db import connections

        from memweb import embedded_db

        connections.close_all()
        embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="corpus rows loaded into each store")
    parser.add_argument("--real", type=int, default=8000,
                        help="corpus rows embedded with MiniLM; the rest get synthetic sentence-like vectors")
    parser.add_argument("--queries", type=int, default=300, help="vector queries (each goes to all three)")
    parser.add_argument("--text-queries", type=int, default=50, help="text queries, each system embedding it")
    parser.add_argument("--adds", type=int, default=400, help="memories each system adds after the load")
    parser.add_argument("--single-adds", type=int, default=100, help="of --adds, how many go one per call")
    parser.add_argument("--batch", type=int, default=50, help="memories per batched add call")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads of the one process all three embedders share (1 is fastest under load)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.torch_threads)
    _refuse_project_data()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    run = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    weights = model_weights_path(MINILM)
    say(f"PostgreSQL data: {settings.DATA_DIR}; {os.cpu_count()} CPUs; torch threads {args.torch_threads}; "
        f"{load_average()}")
    say(f"versions: {versions()}; memweb searches with hnsw.ef_search={HNSW_EF_SEARCH} (m={HNSW_M}, "
        f"ef_construction={HNSW_EF_CONSTRUCTION}); MiniLM weights: {weights}")
    corpus = Corpus(args.size, args.real)
    systems = [Memweb(corpus, run), Mem0(corpus, run, weights), Chroma(corpus, run, weights)]
    try:
        for system in systems:
            ensure_loaded(system, args.size)
        asked = questions(max(args.queries, args.text_queries), seed=99)
        query_vectors = embedder().embed(asked)
        truth = corpus.exact_top(query_vectors)
        search = measure_search(systems, list(query_vectors[:args.queries]), truth[:args.queries], "vector")
        print_search(f"vector search, k={K}, bank + approved filter, {args.queries} queries over {args.size:,} rows",
                     search)
        text = measure_search(systems, asked[:args.text_queries], truth[:args.text_queries], "text")
        print_search(f"text search (each system embeds the query), {args.text_queries} queries", text)
        adds = measure_adds(systems, lessons(args.adds + 1, seed=1234), args.batch, args.single_adds)
        print_adds(adds, args.batch)
        print_ratios(search, text, adds)
        record("peers.recall_memweb", search["memweb"]["recall"], f"recall@5 over {args.size:,} rows")
        say(f"load average at the end: {load_average()}")
    finally:
        stop_embedded_database()


if __name__ == "__main__":
    main()
