"""Where benchmark worlds live in memweb: the BenchmarkWorld table, content-addressed (the key is the
SHA-256 of the database and policy), shared by all workspaces. The evaluation app makes it the
world store of evaluation.environments.benchmark when it starts."""
import json

from evaluation.environments import benchmark
from evaluation.models import BenchmarkWorld


def world_load(key: str) -> benchmark.BenchmarkWorld:
    """The world stored under `key`; LookupError when none is (the import never ran here)."""
    stored = BenchmarkWorld.objects.filter(pk=key).values("database", "policy").first()
    if stored is None:
        raise LookupError(f"no benchmark world {key[:12]}… is stored; import the benchmark first")
    return benchmark.BenchmarkWorld(database=json.loads(stored["database"]), policy=stored["policy"])


def world_store(*, benchmark_name: str, world: benchmark.BenchmarkWorld) -> str:
    """Store `world` once (a second import of the same data finds it) and return its key."""
    key = benchmark.world_key(world)
    BenchmarkWorld.objects.get_or_create(pk=key, defaults={
        "benchmark": benchmark_name, "policy": world.policy, "database": json.dumps(world.database, ensure_ascii=False)})
    return key
