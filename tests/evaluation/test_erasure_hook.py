"""A customer's erasure reaches the evaluation episodes that quoted their Orbs (the erasure hook)."""
from django.db import connection

from evaluation.models import Episode
from evaluation.services import episode_run
from orbs.services import bank_get_or_create, orb_remember
from orbs.services.erasure import customer_erase

MARK = "heliotrope5531"


def test_an_erasure_scrubs_the_prompt_blocks_episodes_were_given(builtin):
    bank = bank_get_or_create(name="quoted", auto_approve="always", approved_only=False)
    orb_remember(bank=bank, text=f"Customer {MARK} wants refunds to store credit only.", customer_key="alice")
    task = builtin.tasks.order_by("external_id").first()
    episode = episode_run(task=task, memory_config={"kind": "memorb", "bank": bank.name, "approved_only": False,
                                                    "min_score": -1.0}, seed=1)
    assert MARK in episode.memories[0]["prompt_block"]
    served = episode.memories[0]["served_ids"]

    record = customer_erase(bank=bank, customer_key="alice", actor=None)

    assert record.counts["evaluation_episodes"] == 1
    scrubbed = Episode.objects.get(pk=episode.pk).memories[0]
    assert MARK not in str(scrubbed) and scrubbed["served_ids"] == served
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM evaluation_episode WHERE memories::text LIKE %s", [f"%{MARK}%"])
        assert cursor.fetchone()[0] == 0
