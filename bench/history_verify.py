"""History chain: how fast a bank's chain is written after the fact and checked.

    MEMWEB_DATA_DIR=/tmp/mw-bench-history python -m bench.history_verify --orbs 10000 --rounds 3

Writes one bank of `--orbs` synthetic Orbs (random unit vectors: the embedder plays no part) with a
creation and an approval event each, so three chain entries per Orb. Then it times:
- chaining them all after the fact, as the migration chains existing rows (history_chain_unchained);
- `history_verify`, the walk `manage.py verify_history`, the bank page and its job make (median of
  `--rounds`), in entries a second;
- the check an import makes of an exported file's chain (history_file_check over the file's lines).
It writes a bank, so it refuses the checkout's own data folder. Never run by the tests.
"""
import argparse
import json
import statistics
import time

import numpy as np

# isort: off
from bench.orbs_retrieval import say  # sets Django up
# isort: on
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from bench.retrieve_load import load_average, refuse_project_data, stop_embedded_database  # noqa: E402
from memweb.embeddings import DIMENSIONS, MINILM  # noqa: E402
from orbs.models import Orb, ReviewEvent, content_hash_of, orb_ids_draw  # noqa: E402
from orbs.services import bank_export, bank_get_or_create  # noqa: E402
from orbs.services.history import history_chain_unchained, history_file_check, history_verify  # noqa: E402


def bank_fill(bank, count: int) -> None:
    """`count` approved Orbs with their two review events, written in bulk (no chain yet)."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(count, DIMENSIONS[MINILM])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    orbs = []
    for n, (orb_id, vector) in enumerate(zip(orb_ids_draw(count), vectors)):
        obs, outcome = f"Customer {n} asks where order #{n} is.", f"Look the order up first ({n})."
        orbs.append(Orb(pk=orb_id, lineage_id=orb_id, bank=bank, obs=obs, emotion="neutral", outcome=outcome,
                        content_hash=content_hash_of(obs=obs, emotion="neutral", outcome=outcome),
                        context={"reward": 1.0}, status=Orb.Status.APPROVED, vector=vector.tolist(),
                        embedding_model=MINILM))
    with transaction.atomic():
        Orb.objects.bulk_create(orbs, batch_size=1000)
        ReviewEvent.objects.bulk_create(
            [ReviewEvent(orb=orb, action=action, after={"status": "approved"}, note="bench")
             for orb in orbs for action in (ReviewEvent.Action.CREATED, ReviewEvent.Action.APPROVED)],
            batch_size=2000)


def timed(work) -> tuple[float, object]:
    began = time.perf_counter()
    result = work()
    return time.perf_counter() - began, result


def file_check_seconds(bank) -> tuple[float, int]:
    """Seconds the import's chain check takes over the bank's exported lines (parsing them excluded)."""
    lines = [json.loads(line) for line in bank_export(bank=bank)]
    entries = [{k: v for k, v in line.items() if k not in ("type", "at")} for line in lines if line["type"] == "history"]
    chained = {"orb": [(n, line) for n, line in enumerate(lines, 1) if line["type"] == "orb"]}
    seconds, check = timed(lambda: history_file_check(entries=entries, lines=chained))
    assert check.ok, check.problem
    return seconds, check.entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orbs", type=int, default=10000, help="Orbs in the bank (three chain entries each)")
    parser.add_argument("--rounds", type=int, default=3, help="times the chain is verified")
    args = parser.parse_args()
    refuse_project_data("writes a bank")
    call_command("migrate", verbosity=0)
    say(f"{time.strftime('%Y-%m-%d %H:%M')}; {args.orbs} Orbs; load average {load_average()}")
    try:
        bank = bank_get_or_create(name=f"history bench {time.strftime('%Y%m%d-%H%M%S')}")
        bank_fill(bank, args.orbs)
        seconds, chained = timed(lambda: transaction.atomic()(history_chain_unchained)(bank_id=bank.pk))
        say(f"chained {chained} rows after the fact in {seconds:.2f} s ({chained / seconds:,.0f} entries/s); "
            f"load average {load_average()}")
        walks = []
        for _ in range(args.rounds):
            seconds, check = timed(lambda: history_verify(bank_id=bank.pk))
            assert check.ok, check.problem
            walks.append(seconds)
            say(f"verified {check.entries} entries in {seconds:.2f} s; load average {load_average()}")
        median = statistics.median(walks)
        say(f"history_verify: median {median:.2f} s for {chained} entries, {chained / median:,.0f} entries/s")
        seconds, entries = file_check_seconds(bank)
        say(f"import's file check: {entries} entries in {seconds:.2f} s ({entries / seconds:,.0f} entries/s); "
            f"load average {load_average()}")
    finally:
        stop_embedded_database()


if __name__ == "__main__":
    main()
