"""The words evaluation adds to memweb's shared vocabulary (declared on EvaluationConfig, read by
memweb.registry): the API scopes its routes ask for, the webhook events it announces, the LLM roles
its agents, simulated customers and feedback call."""
from django.db.models import TextChoices


class EvaluationScope(TextChoices):
    TASKS_READ = "tasks:read", "tasks:read — read task sets and episodes"
    TASKS_WRITE = "tasks:write", "tasks:write — import tasks; play episodes"
    RUNS_READ = "runs:read", "runs:read — read runs, comparisons, exports, feedback"
    RUNS_LAUNCH = "runs:launch", "runs:launch — launch, cancel, resume, retry, import runs; generate feedback"


class EvaluationEvent(TextChoices):
    RUN_FINISHED = "run.finished", "run finished (completed, failed or cancelled)"


# Room for each role's longest honest answer: local servers generate until their context is full
# when a request sets no limit, so every call carries one (MEMWEB_LLM_<ROLE>_MAX_TOKENS overrides it).
_MAX_TOKENS = {"actor": 512, "user_simulator": 200, "scorer": 512}


class EvaluationLLMRole(TextChoices):
    ACTOR = "actor", "actor — the agent under evaluation (and feedback's revision)"
    USER_SIMULATOR = "user_simulator", "user_simulator — the simulated customer (and feedback's critique)"
    SCORER = "scorer", "scorer — feedback's satisfaction score"

    @property
    def max_tokens(self) -> int:
        return _MAX_TOKENS[self.value]
