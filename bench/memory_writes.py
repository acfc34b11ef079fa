"""Trial-end memory writes: ms per Orb and per DMRM trajectory, one at a time against one batch.

    MEMWEB_DATA_DIR=/tmp/mw-bench-writes python -m bench.memory_writes --episodes 20 --rounds 5

A trial's end turns its finished episodes into Orbs (offline reflection and emotion tag, the real
embedder, near-duplicate search, the Orb, its episode record and audit rows) and, for DMRM runs,
their steps into the target memory. Per round it writes the same `--episodes` synthetic episodes
(customer questions with one to three tool calls, successes and failures) into two fresh banks:
one with `orb_from_episode` per episode (what a trial's end did before issue 17), one with
`orbs_from_episodes` (what it does now), alternating which goes first; then the same for DMRM with
`experiences_from_trajectory` per trajectory against `experiences_from_trajectories`. Both paths run
in this process on the same machine, side by side, so their ratio holds under a varying load.

Trial ends run in Celery pool processes, each with its share of the cores in torch threads
(memweb/celery.py); `--torch-threads` (1) does the same here. It writes banks, so it refuses the
checkout's own data folder. Never run by the tests.
"""
import argparse
import itertools
import statistics
import time

import torch

# isort: off
from bench.orbs_retrieval import ITEMS, SENTENCES, say  # sets Django up
# isort: on
from django.core.management import call_command  # noqa: E402

from bench.retrieve_load import load_average, refuse_project_data, stop_embedded_database  # noqa: E402
from memweb.embeddings import embedder  # noqa: E402
from orbs.dmrm.services import TrajectoryToLearn, experiences_from_trajectories, experiences_from_trajectory  # noqa: E402
from orbs.models import Orb, orb_document  # noqa: E402
from orbs.services import EpisodeToRemember, bank_get_or_create, orb_from_episode, orbs_from_episodes  # noqa: E402

TOOLS = [("find_user_id_by_email", {"email": "ann@example.com"}), ("get_order_details", {"order_id": "#W1001"}),
         ("return_delivered_order_items", {"order_id": "#W1001", "item_ids": ["1"]})]


def episodes(count: int, seed: int) -> list[dict]:
    """Distinct customer episodes: a question, one to three tool calls with results, an answer."""
    texts = [s.format(item=i) for s, i in itertools.product(SENTENCES, ITEMS)]
    made = []
    for n in range(count):
        text, calls = f"{texts[(seed + n) % len(texts)]} (order {seed}-{n})", TOOLS[:1 + n % 3]
        messages = [{"role": "user", "content": text}]
        for name, arguments in calls:
            messages += [{"role": "assistant", "content": "", "tool_calls": [{"name": name, "arguments": arguments}]},
                         {"role": "tool", "tool_name": name, "content": '{"status": "ok"}'}]
        success = n % 4 != 0
        messages.append({"role": "assistant", "content": "Done." if success else "I could not do that."})
        made.append({"task_id": f"bench-{seed}-{n}", "domain": "appliances", "messages": messages,
                     "reward": 1.0 if success else 0.0, "success": success, "reward_breakdown": {"done": success},
                     "errors": [], "metadata": {}})
    return made


def _side_by_side(one_at_a_time, batch, batch_first: bool) -> tuple[float, float]:
    """Seconds of each write, the batch first in every other round."""
    def timed(write) -> float:
        began = time.perf_counter()
        write()
        return time.perf_counter() - began

    if batch_first:
        batched = timed(batch)
        return timed(one_at_a_time), batched
    return timed(one_at_a_time), timed(batch)


def embedding_alone(bank) -> float:
    """Seconds the embedder alone takes for the bank's Orb documents in one call: the part of a
    batch that is model compute, not database work."""
    documents = [orb_document(obs=o.obs, emotion=o.emotion, outcome=o.outcome, context=o.context)
                 for o in Orb.objects.filter(bank=bank)]
    began = time.perf_counter()
    embedder().embed(documents)
    return time.perf_counter() - began


def orbs_round(trajectories: list[dict], tag: str, batch_first: bool) -> tuple[float, float, float]:
    """Seconds for one-at-a-time, for the batch (each into a fresh bank), and for the batch's embedding alone."""
    alone, batched = (bank_get_or_create(name=f"bench writes {tag} {kind}") for kind in ("alone", "batched"))
    label = f"bench {tag}"

    def one_at_a_time():
        for n, trajectory in enumerate(trajectories):
            orb_from_episode(bank=alone, trajectory=trajectory, episode_ref=f"{tag}-{n}", source_label=label)

    def batch():
        orbs_from_episodes(bank=batched, source_label=label,
                           episodes=[EpisodeToRemember(t, f"{tag}-{n}") for n, t in enumerate(trajectories)])

    return *_side_by_side(one_at_a_time, batch, batch_first), embedding_alone(batched)


def dmrm_round(trajectories: list[dict], tag: str, batch_first: bool) -> tuple[float, float]:
    alone, batched = (bank_get_or_create(name=f"bench dmrm {tag} {kind}") for kind in ("alone", "batched"))
    items = [TrajectoryToLearn(t, f"{tag}-{n}", run_ref="bench", episode_ref=f"{tag}-{n}")
             for n, t in enumerate(trajectories)]

    def one_at_a_time():
        for i in items:
            experiences_from_trajectory(bank=alone, trajectory=i.trajectory, trajectory_id=i.trajectory_id,
                                        run_ref=i.run_ref, episode_ref=i.episode_ref)

    def batch():
        experiences_from_trajectories(bank=batched, trajectories=items)

    return _side_by_side(one_at_a_time, batch, batch_first)


def summary(what: str, unit: str, count: int, rounds: list[tuple]) -> None:
    alone = [a * 1000 / count for a, _b, *_ in rounds]
    batched = [b * 1000 / count for _a, b, *_ in rounds]
    ratios = [a / b for a, b, *_ in rounds]
    say(f"{what}: one at a time median {statistics.median(alone):.1f} ms/{unit} (min {min(alone):.1f}), "
        f"batched median {statistics.median(batched):.1f} ms/{unit} (min {min(batched):.1f}); "
        f"ratio per round median {statistics.median(ratios):.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20, help="episodes per trial")
    parser.add_argument("--rounds", type=int, default=5, help="trials written each way")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads of this process (a Celery pool process of two on two cores: 1)")
    args = parser.parse_args()
    refuse_project_data("writes banks")
    torch.set_num_threads(args.torch_threads)
    call_command("migrate", verbosity=0)
    embedder().embed(["warm up"])
    stamp = time.strftime("%Y%m%d-%H%M%S")
    say(f"{time.strftime('%Y-%m-%d %H:%M')}; {args.episodes} episodes per trial, {args.rounds} rounds; "
        f"{args.torch_threads} torch thread(s); "
        f"load average {load_average()}")
    try:
        orbs, dmrm = [], []
        for r in range(args.rounds):
            trajectories = episodes(args.episodes, seed=r * args.episodes)
            orbs.append(orbs_round(trajectories, f"{stamp}-{r}", batch_first=r % 2 == 1))
            dmrm.append(dmrm_round(trajectories, f"{stamp}-{r}", batch_first=r % 2 == 1))
            orb_ms = [seconds * 1000 / args.episodes for seconds in orbs[-1]]
            dmrm_ms = [seconds * 1000 / args.episodes for seconds in dmrm[-1]]
            say(f"round {r + 1}: Orbs {orb_ms[0]:.1f} vs {orb_ms[1]:.1f} ms/Orb (the batch's embedding {orb_ms[2]:.1f}), "
                f"DMRM {dmrm_ms[0]:.1f} vs {dmrm_ms[1]:.1f} ms/trajectory (one at a time vs batched); "
                f"load average {load_average()}")
        summary("Orbs", "Orb", args.episodes, orbs)
        say(f"Orbs: the batch's embedding alone median {statistics.median(o[2] for o in orbs) * 1000 / args.episodes:.1f}"
            " ms/Orb")
        summary("DMRM", "trajectory", args.episodes, dmrm)
    finally:
        stop_embedded_database()


if __name__ == "__main__":
    main()
