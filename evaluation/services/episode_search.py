"""The episode list's filters: run, task, outcome, failed reward component, memory mode, backend,
latency, errors, the model its LLM calls used, and full-text search over what was said in the
transcript (ranked, with a highlighted snippet). Each listed episode carries its LLM usage."""
from dataclasses import dataclass

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank
from django.db.models import F, Q, QuerySet, TextField
from django.db.models.functions import Cast

from evaluation.configs import AgentBackend
from evaluation.environments import environments
from evaluation.models import SEARCH_CONFIG, Episode, transcript_texts
from evaluation.services.traces import episode_calls_erred, episode_calls_used, episodes_with_usage

# The reward's pass/fail components (evaluation.shop.reward); a failed one is 0.0 in reward_breakdown.
REWARD_COMPONENTS = (
    ("state", "final shop state"),
    ("grounded", "no invented ids"),
    ("lookups", "required look-ups"),
    ("outputs", "required facts told"),
)


def reward_component_choices() -> list[tuple[str, str]]:
    """The shop's components, then every other environment's (τ²-bench's db, communicate, ...) by name."""
    listed = dict(REWARD_COMPONENTS)
    for world in environments():
        for name in world.reward_components:
            listed.setdefault(name, f"{name} ({world.label})")
    return list(listed.items())


# ts_headline marks matches with these; the template escapes the text first, then turns them into <mark>.
MATCH_START, MATCH_STOP = "\x02", "\x03"


@dataclass(frozen=True)
class EpisodeFilters:
    run: int | None = None
    task: str = ""
    outcome: str = ""  # "success" / "failure"
    component: str = ""  # a reward component that failed
    memory: str = ""
    backend: str = ""  # "scripted" / "llm" (the agent's)
    q: str = ""
    min_latency: int | None = None  # ms, the whole episode's
    error: str = ""  # "infrastructure" (the episode could not finish) / "llm" (a call failed after its retries)
    model: str = ""  # a model one of its LLM calls used

    def active(self) -> dict[str, object]:
        return {name: value for name, value in vars(self).items() if value not in (None, "")}


def episodes_filtered(*, filters: EpisodeFilters, workspace) -> QuerySet:
    """The `workspace`'s episodes that pass every filter, newest first, each with its LLM usage
    (services.traces.episodes_with_usage); with a text search, best match first and each carrying
    `rank` and `snippet`."""
    episodes = Episode.objects.select_related("task", "task__task_set").of(workspace).defer(
        "transcript_search")
    episodes = episodes_with_usage(_measured(episodes, filters))
    if filters.run is not None:
        # Runs sit above this app: their rows point at episodes, so the reverse relation filters
        # without importing them.
        episodes = episodes.filter(run_episode__run_id=filters.run)
    if filters.task:
        episodes = episodes.filter(task__external_id__icontains=filters.task)
    if filters.outcome:
        episodes = episodes.filter(status=Episode.Status.COMPLETED, success=filters.outcome == "success")
    if filters.component:
        episodes = episodes.filter(**{f"reward_breakdown__{filters.component}": 0.0})
    if filters.memory:
        episodes = episodes.filter(memory_kind=filters.memory)
    if filters.backend:
        # An environment's scripted agent may say more after "scripted: " (the gold-replay agent does).
        scripted = Q(agent_backend=AgentBackend.SCRIPTED) | Q(agent_backend__startswith=f"{AgentBackend.SCRIPTED}:")
        episodes = episodes.filter(scripted) if filters.backend == "scripted" else episodes.exclude(scripted)
    return _searched(episodes, filters.q.strip()) if filters.q.strip() else episodes


def _measured(episodes: QuerySet, filters: EpisodeFilters) -> QuerySet:
    """The filters on what an episode cost: its latency, its errors, its calls' model."""
    if filters.min_latency is not None:
        episodes = episodes.filter(latency_ms__gte=filters.min_latency)
    if filters.error == "infrastructure":
        episodes = episodes.filter(status=Episode.Status.ERROR)
    elif filters.error == "llm":
        episodes = episodes.filter(episode_calls_erred())
    if filters.model:
        episodes = episodes.filter(episode_calls_used(filters.model))
    return episodes


def _searched(episodes: QuerySet, text: str) -> QuerySet:
    query = SearchQuery(text, config=SEARCH_CONFIG, search_type="websearch")
    said = Cast(transcript_texts(), TextField())
    return episodes.filter(transcript_search=query).annotate(
        rank=SearchRank(F("transcript_search"), query),
        snippet=SearchHeadline(said, query, config=SEARCH_CONFIG, start_sel=MATCH_START, stop_sel=MATCH_STOP,
                               max_fragments=2, max_words=18, min_words=6, fragment_delimiter=" … "),
    ).order_by("-rank", "-created_at", "-pk")
