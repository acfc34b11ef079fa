"""The external memory layer: a memory service anyone built, in any language, reached over the HTTP
contract of evaluation.memory_layers.schemas (docs/MEMORY_LAYERS.md, "The HTTP contract").

A run names the service's URL and key (`external_url`, `external_key`). At launch memweb asks the
service to describe itself (a service that does not answer, or speaks another contract, is refused
then) and to reset the run's namespace; before each customer turn it asks `retrieve`; at each
trial's end it sends the trial's finished episodes to `learn`, one call each, then asks `snapshot`.

A call that times out, answers 5xx or answers a body that is not the contract's is retried with
backoff; when the last attempt fails, the episode (retrieve) or the learning record (learn) keeps
the error and the run goes on: one bad call never fails a run. Every call's milliseconds and
attempts are kept beside its result, so the run's latency is measured as the run played.
"""
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2 as httpx
import pydantic
from django.utils.html import format_html

from evaluation.configs import MemoryConfig
from evaluation.feedback.services import feedback_of
from evaluation.memory_layers.banked import finished_rows
from evaluation.memory_layers.models import ExternalLearning, ExternalMemoryAccess
from evaluation.memory_layers.protocol import MemoryLayer
from evaluation.memory_layers.schemas import (
    CONTRACT_VERSION,
    LayerBudget,
    LayerDescribeOut,
    LayerEpisode,
    LayerError,
    LayerFeedback,
    LayerLearnIn,
    LayerLearnOut,
    LayerMessage,
    LayerNamespaceIn,
    LayerResetOut,
    LayerRetrieveIn,
    LayerRetrieveOut,
    LayerSituation,
    LayerSnapshotOut,
    LayerStep,
    budget_cut,
    major_version,
)
from evaluation.runs.models import FeedbackMemory
from evaluation.runs.services.spec import RunLaunchError
from evaluation.services import EpisodeConfigError, episode_ref, episode_trajectory
from orbs.budget import DEFAULT_K, prompt_budget_for

TIMEOUT_SECONDS = 10.0  # each attempt, to connect and to read
ATTEMPTS = 3
BACKOFF_SECONDS = 0.25  # before the second attempt; doubled before each later one
ERROR_CHARS = 500
DETAIL_CHARS = 200  # of a refusing service's `detail`
RESULT_CHARS = 4000  # of a tool result sent in an episode's steps


class CallFailed(Exception):
    """A contract call that failed for good; `trace` says how (call, attempts, ms, error)."""

    def __init__(self, trace: dict):
        self.trace = trace
        super().__init__(f"{trace['call']} failed after {trace['attempts']} attempt(s): {trace['error']}")


class _Retryable(Exception):
    """This attempt failed in a way another attempt may not: a timeout, a 5xx, a body not the contract's."""


class _Refused(Exception):
    """A 4xx answer: the key, the namespace or the body is wrong, which another attempt will not change."""


@dataclass(frozen=True)
class ServiceClient:
    """One service's base URL and key; each call validates its answer against the contract."""

    url: str
    key: str

    def call(self, name: str, body: pydantic.BaseModel | None, answer: type[pydantic.BaseModel]):
        """(answer, trace); CallFailed once the attempts are spent or on an answer no retry changes (4xx)."""
        started, attempts, error = time.perf_counter(), 0, ""
        while attempts < ATTEMPTS:
            if attempts:
                time.sleep(BACKOFF_SECONDS * 2 ** (attempts - 1))
            attempts += 1
            try:
                parsed = self._attempt(name, body, answer)
                return parsed, _trace(name, attempts, started)
            except _Retryable as retryable:
                error = str(retryable)
            except _Refused as refused:
                error = str(refused)
                break
        raise CallFailed(_trace(name, attempts, started) | {"error": error[:ERROR_CHARS]})

    def _attempt(self, name: str, body, answer):
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        try:
            with httpx.Client(timeout=TIMEOUT_SECONDS) as http:
                response = http.request("POST" if body is not None else "GET", self._endpoint(name), headers=headers,
                                        json=body.model_dump(mode="json") if body is not None else None)
        except httpx.TimeoutException:
            raise _Retryable(f"no answer within {TIMEOUT_SECONDS:g} s") from None
        except httpx.HTTPError as exc:
            raise _Retryable(f"no HTTP answer ({type(exc).__name__})") from None
        if response.status_code >= 500:
            raise _Retryable(f"the service answered {response.status_code}{_detail(response)}")
        if response.status_code >= 400:
            raise _Refused(f"the service refused the call ({response.status_code}){_detail(response)}")
        try:
            return answer.model_validate_json(response.content)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "(body)"
            raise _Retryable(f"the answer is not the contract's {answer.__name__}: {where}: {first['msg']}") from None

    def _endpoint(self, name: str) -> str:
        return f"{self.url.rstrip('/')}/{name}"


def _detail(response) -> str:
    """The contract's `detail` of an error answer, and nothing else of it: a URL that is not a memory
    service (an internal page) shows only its status, never its content."""
    try:
        detail = LayerError.model_validate_json(response.content).detail
    except pydantic.ValidationError:
        return ""
    return f": {str(detail)[:DETAIL_CHARS]}"


def _trace(call: str, attempts: int, started: float) -> dict:
    return {"call": call, "attempts": attempts, "ms": round((time.perf_counter() - started) * 1000, 3)}


def _client(access: ExternalMemoryAccess) -> ServiceClient:
    return ServiceClient(url=access.url, key=access.key)


# --- before each customer turn -----------------------------------------------------------------

def _message(message: dict) -> LayerMessage | None:
    """A transcript message as the contract's: what the conversation showed, nothing of the task's."""
    role = message.get("role")
    if role not in ("user", "assistant", "tool"):
        return None
    calls = [{"name": call["name"], "arguments": call.get("arguments") or {}} for call in message.get("tool_calls", ())]
    return LayerMessage(role=role, content=(message.get("content") or "")[:RESULT_CHARS],
                   tool_name=message.get("tool_name", "") if role == "tool" else "", tool_calls=calls)


class ExternalHook:
    def __init__(self, *, config: MemoryConfig, task: dict, access: ExternalMemoryAccess):
        self.config, self.client, self.namespace = config, _client(access), access.namespace
        # Only the task's id, domain and customer: its answer key never leaves memweb.
        self.task_id, self.domain, self.customer_key = task["id"], task.get("domain", ""), task.get("customer_id", "")
        self.block = ""
        self.retrieval_ids: list[int] = []  # no MemOrb retrievals to close when the episode ends

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        if not self.config.per_turn and turn > 1:
            return self.block, None
        k = self.config.k or DEFAULT_K
        budget = LayerBudget(tokens=prompt_budget_for(k), items=k)
        request = LayerRetrieveIn(namespace=self.namespace, customer_key=self.customer_key, budget=budget,
                             situation=LayerSituation(text=query, domain=self.domain, task_id=self.task_id, turn=turn),
                             dialogue=[m for m in map(_message, dialogue) if m is not None])
        try:
            answer, trace = self.client.call("retrieve", request, LayerRetrieveOut)
        except CallFailed as failed:
            self.block = ""  # the agent answers without memory this turn; the episode keeps why
            return self.block, {"turn": turn, "query": query, "external": failed.trace}
        items = answer.items[:k]
        self.block, cut = budget_cut(answer.prompt_block, budget.tokens)
        return self.block, {"turn": turn, "query": query, "external": trace | {
            "prompt_block": self.block, "retrieved": len(answer.items), "injected": len(items), "budget": budget.tokens,
            "cut": len(answer.items) - len(items) + (1 if cut else 0),
            "items": [item.model_dump(mode="json") for item in items]}}


# --- at each trial's end ----------------------------------------------------------------------

def _steps(transcript: list[dict]) -> list[LayerStep]:
    """Each tool call of the episode with the result that answered it, in order."""
    results = iter(m for m in transcript if m["role"] == "tool")
    steps = []
    for message in transcript:
        for call in message.get("tool_calls", ()) if message["role"] == "assistant" else ():
            result = next(results, {})
            steps.append(LayerStep(turn=max(1, message.get("turn", 1)), tool=call["name"],
                              arguments=call.get("arguments") or {}, ok=result.get("ok", True),
                              result=(result.get("content") or "")[:RESULT_CHARS]))
    return steps


def _feedback(episode) -> LayerFeedback | None:
    given = feedback_of([episode]).first()
    if given is None:
        return None
    return LayerFeedback(critique=given.critique, satisfaction=given.score, action=given.action)


def contract_episode(episode, *, with_feedback: bool) -> LayerEpisode:
    """A stored episode as the contract's: the trajectory memweb's own memories learn from (never the
    oracle input), its reward components, the user's feedback when the run feeds it to memory."""
    trajectory = episode_trajectory(episode)
    return LayerEpisode(episode_ref=episode_ref(episode), task_id=trajectory["task_id"], domain=trajectory["domain"],
                   customer_key=trajectory["customer_key"], dialogue=[LayerMessage.model_validate(m) for m in
                                                                      trajectory["messages"]],
                   success=episode.success, reward=episode.reward, reward_components=episode.reward_breakdown,
                   feedback=_feedback(episode) if with_feedback else None, steps=_steps(episode.transcript))


def _learn(client: ServiceClient, namespace: str, row, *, with_feedback: bool) -> ExternalLearning:
    learning = ExternalLearning(run_episode=row)
    try:
        answer, trace = client.call("learn", LayerLearnIn(namespace=namespace, episode=contract_episode(
            row.episode, with_feedback=with_feedback)), LayerLearnOut)
        learning.learned = answer.learned
    except CallFailed as failed:
        trace = failed.trace
        learning.error = trace["error"]
    learning.attempts, learning.latency_ms = trace["attempts"], trace["ms"]
    return learning


def _snapshot(client: ServiceClient, namespace: str, trial_number: int) -> dict:
    try:
        answer, trace = client.call("snapshot", LayerNamespaceIn(namespace=namespace), LayerSnapshotOut)
        return {"trial": trial_number, **trace, **answer.model_dump(mode="json")}
    except CallFailed as failed:
        return {"trial": trial_number, **failed.trace}


# --- the layer ---------------------------------------------------------------------------------

def _describe_problem(url: str, key: str) -> tuple[LayerDescribeOut | None, str]:
    """The service's description, or why it cannot be evaluated."""
    try:
        described, _ = ServiceClient(url=url, key=key).call("describe", None, LayerDescribeOut)
    except CallFailed as failed:
        return None, f"the service at {url} does not answer describe: {failed.trace['error']}"
    if major_version(described.contract_version) != major_version(CONTRACT_VERSION):
        return None, (f"the service at {url} speaks contract version {described.contract_version}; memweb speaks "
                      f"{CONTRACT_VERSION}")
    return described, ""


def _namespace(run) -> str:
    """The run's memory on the service: its id, and a random part so two memweb installs never share one."""
    return f"memweb-run-{run.pk}-{secrets.token_hex(4)}"


def access_of(run) -> ExternalMemoryAccess | None:
    return ExternalMemoryAccess.objects.filter(run=run).first()


class ExternalLayer(MemoryLayer):
    name, label = "external", "external memory layer (HTTP contract)"
    reaches_service = learns_from_feedback = True
    episode_partials = ("evaluation/memory_layers/_external_episode.html",)

    def launch_problems(self, spec) -> list[tuple[str, str]]:
        problems = super().launch_problems(spec)
        if not spec.external_url:
            return problems + [("external_url", "an external memory layer needs the service's URL")]
        _, problem = _describe_problem(spec.external_url, spec.external_key)
        return problems + ([("external_url", problem)] if problem else [])

    def prepare(self, *, run, spec, source, copied=None) -> None:
        """The run's access (inside the launch's transaction), then a reset of its namespace: a
        service that cannot reset refuses the launch, and the transaction writes nothing."""
        described, problem = _describe_problem(spec.external_url, spec.external_key)
        if problem:
            raise RunLaunchError([("external_url", problem)])
        access = ExternalMemoryAccess.objects.create(run=run, url=spec.external_url, key=spec.external_key,
                                                     namespace=_namespace(run), service=described.model_dump())
        try:
            _client(access).call("reset", LayerNamespaceIn(namespace=access.namespace), LayerResetOut)
        except CallFailed as failed:
            raise RunLaunchError([("external_url", f"the service at {access.url} could not reset the run's "
                                                   f"namespace: {failed.trace['error']}")]) from None

    def episode_config(self, run, *, row=None) -> MemoryConfig:
        spec, access = run.run_spec, access_of(run)
        return MemoryConfig(kind=self.name, k=spec.memory_k, per_turn=spec.per_turn,
                            namespace=access.namespace if access else "")

    def hook(self, *, config: MemoryConfig, task: dict, bank):
        access = ExternalMemoryAccess.objects.filter(namespace=config.namespace).first() if config.namespace else None
        if access is None:
            raise EpisodeConfigError("an external memory layer plays only inside the run that named its service")
        return ExternalHook(config=config, task=task, access=access)

    def feedback_into_memory(self, run) -> bool:
        spec = run.run_spec
        return spec.feedback_enabled and spec.feedback_memory == FeedbackMemory.ONPOLICY

    def trial_end(self, *, trial) -> None:
        """Each finished episode not sent yet to learn, then the namespace's snapshot. A failed call is
        recorded, never raised: the next trial plays with what the service did learn."""
        run, access = trial.run, access_of(trial.run)
        if access is None:
            raise EpisodeConfigError("the run's external memory access no longer exists")
        client, with_feedback = _client(access), self.feedback_into_memory(run)
        for row in finished_rows(trial).filter(external_learning__isnull=True):
            _learn(client, access.namespace, row, with_feedback=with_feedback).save()
        access.snapshots = [*access.snapshots, _snapshot(client, access.namespace, trial.number)]
        access.save(update_fields=["snapshots"])

    def export_header(self, run) -> dict:
        access = access_of(run)
        service = access.service if access else {}
        return super().export_header(run) | {
            "url": run.run_spec.external_url, "service": service.get("name", ""),
            "service_version": service.get("version", ""), "contract_version": service.get("contract_version", ""),
            "namespace": access.namespace if access else "", "snapshots": access.snapshots if access else []}

    def arm_name(self, run) -> str:
        access = access_of(run)
        return f"{self.label}: {access.service.get('name', '?') if access else '?'}"

    def settings_summary(self, run) -> list[str]:
        access, spec = access_of(run), run.run_spec
        service = access.service if access else {}
        named = f"{service.get('name', '?')} {service.get('version', '')}".strip()
        lines = [f"k={spec.memory_k}", format_html('<span id="run-external-service">{} at {}</span>', named,
                                                   urlsplit(spec.external_url).netloc)]
        # What the service says of itself (Mem0 without an LLM: it stores raw text, extracts no facts).
        lines += [format_html('<span id="run-external-description">{}</span>', service["description"])
                  ] if service.get("description") else []
        return lines + ([] if spec.per_turn else ["once per episode"])

