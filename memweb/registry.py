"""What the apps contribute to memweb's shared infrastructure, declared on their AppConfig.

memweb sits at the bottom of the stack and imports nothing above it, yet its navigation, home
page, worker heartbeat and role groups need things only the apps know. Each app declares them as
class attributes of its AppConfig and names functions by dotted path, resolved when used and
verified at start-up by `registry_check` (a Django system check: `manage.py check` names the app,
the attribute and the path of a declaration that does not resolve). ATTRIBUTES lists them all:

    nav_items = (("Runs", "evaluation:run_list", ("operator",)),)
    home_counts = (("Runs in progress", "evaluation.runs.services.runs_count_active", ("operator",), url_name),)
    home_charts = (("Success rate by model", "evaluation.runs.services.dashboard.success_by_model", ("operator",)),)
    worker_beats = ("evaluation.runs.services.runs_watch_overdue",)
    trajectory_sources = (("episodes", "evaluation.services.trajectories_of_domain"),)
    role_permissions = {"operator": ("evaluation.view_task", ...)}
    bank_file_parts = ("orbs.dmrm.services.transfer",)
    job_kinds = (("orbs.bank_import", "orbs.services.transfer.bank_import_job"),)
    erasure_hooks = (("evaluation_episodes", "evaluation.services.erasure.episode_memories_scrub"),)
    history_kinds = ("orbs.services.history.REVIEW_EVENT",)
    study_sources = (("Evaluation runs", "evaluation:run_list"),)
    bank_checks = ("orbs.services.banks.bank_slug_known",)
    api_scopes = ("orbs.vocabulary.OrbsScope",)
    webhook_events = ("orbs.vocabulary.OrbsEvent",)
    llm_roles = ("orbs.vocabulary.OrbsLLMRole",)

A worker beat is called on every worker heartbeat with no arguments. A trajectory source is
called as `source(domain=..., limit=...)` and returns trajectory dicts (orbs.schemas.TrajectoryIn)
of finished episodes; orbs' DMRM source-memory builder reads its episodes through one.
A bank file part is a module that adds its own lines to a bank's JSONL file (orbs.services.transfer
describes what it provides), so a memory above orbs travels with the bank.
A job kind names the function a background job of that kind runs on a worker (memweb.jobs): it is
called as `function(job_context, **payload)` and returns the job's result.
An erasure hook is called as `hook(bank=..., orb_ids=[...])` inside a customer's erasure
(orbs.services.erasure) and removes the copies of those Orbs' text its app keeps; it returns how
many rows it changed, which the erasure's audit record counts under the hook's name.
A history kind names a table whose rows join their bank's hash chain (orbs.services.history.HistoryKind
describes it), so a memory above orbs has its records chained with the bank's.
A bank check is called as `check(slug=..., workspace_id=...)` and says whether that workspace has a
memory bank of that slug (webhooks name banks by slug).
A study source is a page (label, URL name) from which conversations are added to annotation
campaigns; annotation links to it without knowing the app behind it.
The app's vocabulary is its own: the API scopes its routes ask for, the webhook events it announces
and the LLM roles its backends call are TextChoices classes in the app (each LLM role with a
`max_tokens` property), which memweb's mechanisms (API keys, webhooks, the LLM client) read here.
"""
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from importlib import import_module
from types import ModuleType

from django.apps import AppConfig, apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db.models import TextChoices
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string


class Kind(Enum):
    """What one item of a declared entry is, and so how the start-up check verifies it."""

    TEXT = "text"  # a label or a name of the app's choosing
    OBJECT = "object"  # a dotted path to a function or a value (import_string)
    MODULE = "module"  # a dotted path to a module (import_module)
    CHOICES = "choices"  # a dotted path to a TextChoices class: the app's own vocabulary
    URL = "url"  # a URL name, optionally followed by a query string
    ROLES = "roles"  # a tuple of memweb.roles.Role values


@dataclass(frozen=True)
class Attribute:
    """An AppConfig attribute memweb reads: a tuple of entries, each a tuple of `items` (at least
    `required` of them), or a single value where `items` has one kind."""

    name: str
    items: tuple[Kind, ...]
    read_by: str
    required: int | None = None

    @property
    def is_plain(self) -> bool:
        return len(self.items) == 1

    def sizes(self) -> tuple[int, ...]:
        return tuple(range(self.required or len(self.items), len(self.items) + 1))


ATTRIBUTES = (
    Attribute("nav_items", (Kind.TEXT, Kind.URL, Kind.ROLES), "memweb.navigation"),
    Attribute("home_counts", (Kind.TEXT, Kind.OBJECT, Kind.ROLES, Kind.URL), "memweb.navigation", required=3),
    Attribute("home_charts", (Kind.TEXT, Kind.OBJECT, Kind.ROLES), "memweb.navigation"),
    Attribute("worker_beats", (Kind.OBJECT,), "the worker heartbeat (memweb.celery)"),
    Attribute("trajectory_sources", (Kind.TEXT, Kind.OBJECT), "orbs.dmrm.services.source"),
    Attribute("outcome_sources", (Kind.TEXT, Kind.OBJECT), "manage.py aa_calibrate --run"),
    Attribute("bank_file_parts", (Kind.MODULE,), "orbs.services.transfer"),
    Attribute("job_kinds", (Kind.TEXT, Kind.OBJECT), "memweb.jobs"),
    Attribute("erasure_hooks", (Kind.TEXT, Kind.OBJECT), "orbs.services.erasure"),
    Attribute("history_kinds", (Kind.OBJECT,), "orbs.services.history"),
    Attribute("study_sources", (Kind.TEXT, Kind.URL), "annotation's campaign pages"),
    Attribute("bank_checks", (Kind.OBJECT,), "memweb.webhooks"),
    Attribute("api_scopes", (Kind.CHOICES,), "memweb.auth, the API-key form"),
    Attribute("webhook_events", (Kind.CHOICES,), "memweb.webhooks"),
    Attribute("llm_roles", (Kind.CHOICES,), "memweb.llm (each role's endpoint settings)"),
)
BY_NAME = {attribute.name: attribute for attribute in ATTRIBUTES}


def declared(attribute: str) -> list[tuple[str, object]]:
    """(app name, entry) for every entry of `attribute` on every installed app, in app order."""
    return [(config.name, entry) for config in apps.get_app_configs() for entry in getattr(config, attribute, ())]


def declared_tuples(attribute: str, sizes: tuple[int, ...]) -> list[tuple]:
    """The entries of `attribute`, each checked to be a tuple of one of `sizes` items."""
    found = []
    for app, entry in declared(attribute):
        if not isinstance(entry, tuple) or len(entry) not in sizes:
            raise ImproperlyConfigured(
                f"{app}: each entry of {attribute} must be a tuple of {' or '.join(map(str, sizes))} items, got {entry!r}"
            )
        found.append(entry)
    return found


def role_permissions(role: str) -> list[str]:
    """The "app_label.codename" permissions the apps grant to `role`'s group."""
    return [perm for config in apps.get_app_configs() for perm in getattr(config, "role_permissions", {}).get(role, ())]


def worker_beats() -> list[Callable[[], object]]:
    return [import_string(path) for _, path in declared("worker_beats")]


def trajectory_source(name: str) -> Callable[..., list[dict]]:
    """The trajectory source an app registered under `name`."""
    sources = dict(declared_tuples("trajectory_sources", (2,)))
    if name not in sources:
        raise ImproperlyConfigured(f"no installed app provides the trajectory source {name!r}")
    return import_string(sources[name])


def outcome_source(name: str) -> Callable[..., dict[str, list]]:
    """The stored-outcomes source an app registered under `name` (a success matrix by id)."""
    sources = dict(declared_tuples("outcome_sources", (2,)))
    if name not in sources:
        raise ImproperlyConfigured(f"no installed app provides the outcome source {name!r}")
    return import_string(sources[name])


def bank_file_parts() -> list[ModuleType]:
    """The modules that carry a memory of their own in a bank's file, in app order."""
    return [import_module(path) for _, path in declared("bank_file_parts")]


def job_function(kind: str) -> Callable[..., dict]:
    """The function an app registered for background jobs of `kind` (memweb.jobs)."""
    kinds = dict(declared_tuples("job_kinds", (2,)))
    if kind not in kinds:
        raise ImproperlyConfigured(f"no installed app provides the job kind {kind!r}")
    return import_string(kinds[kind])


def erasure_hooks() -> list[tuple[str, Callable[..., int]]]:
    """(name, function) of every erasure hook, in app order."""
    return [(name, import_string(path)) for name, path in declared_tuples("erasure_hooks", (2,))]


def history_kinds() -> list:
    """The chained tables' kinds (orbs.services.history.HistoryKind), in app order."""
    return [import_string(path) for _, path in declared("history_kinds")]


def study_sources() -> list[tuple[str, str]]:
    """(label, URL) of every page that adds conversations to annotation campaigns."""
    return [(label, reverse(url_name)) for label, url_name in declared_tuples("study_sources", (2,))]


def bank_known(*, slug: str, workspace_id: int) -> bool:
    """Whether an app keeping memory banks has one called `slug` in that workspace."""
    return any(import_string(path)(slug=slug, workspace_id=workspace_id) for _, path in declared("bank_checks"))


# --- the apps' own vocabulary ----------------------------------------------------------------------

def vocabulary(attribute: str) -> list[TextChoices]:
    """Every member of every TextChoices class the apps declare under `attribute`, in app order."""
    return [member for _, path in declared(attribute) for member in import_string(path)]


def api_scopes() -> list[TextChoices]:
    """The scopes an API key can hold; each app declares those its routes ask for."""
    return vocabulary("api_scopes")


def webhook_events() -> list[TextChoices]:
    """The events webhooks subscribe to; each app declares those it announces."""
    return vocabulary("webhook_events")


def llm_roles() -> list[TextChoices]:
    """The LLM roles (each with its `max_tokens`); each app declares those its backends call."""
    return vocabulary("llm_roles")


# --- the start-up check: every declared path resolved at once, not when first used -----------------

def registry_check(app_configs: list[AppConfig] | None = None, **kwargs) -> list[checks.Error]:
    """Registered by MemwebConfig.ready(), so `manage.py check` (and every command that runs the
    checks) fails on a declaration that would otherwise fail only when its page or job is reached."""
    configs = app_configs or apps.get_app_configs()
    errors = [error for config in configs for error in _config_errors(config)]
    return errors + _vocabulary_clashes(configs)


def _config_errors(config: AppConfig) -> list[checks.Error]:
    errors = []
    for attribute in ATTRIBUTES:
        entries = getattr(config, attribute.name, ())
        if not isinstance(entries, tuple):
            errors.append(_error(config, attribute.name, f"must be a tuple, got {type(entries).__name__}"))
            continue
        for entry in entries:
            errors += _entry_errors(config, attribute, entry)
    if (demo := getattr(config, "demo_module", None)) is not None and (problem := _item_problem(Kind.MODULE, demo)):
        errors.append(_error(config, "demo_module", f"{demo!r} {problem}"))
    return errors + _permission_errors(config)


def _entry_errors(config: AppConfig, attribute: Attribute, entry) -> list[checks.Error]:
    items = (entry,) if attribute.is_plain else entry
    if not attribute.is_plain and (not isinstance(entry, tuple) or len(entry) not in attribute.sizes()):
        sizes = " or ".join(map(str, attribute.sizes()))
        return [_error(config, attribute.name, f"each entry must be a tuple of {sizes} items, got {entry!r}")]
    return [_error(config, attribute.name, f"{item!r} {problem}")
            for kind, item in zip(attribute.items, items, strict=False) if (problem := _item_problem(kind, item))]


def _item_problem(kind: Kind, item) -> str | None:
    """What is wrong with one declared item, or None."""
    if kind is Kind.ROLES:
        return _roles_problem(item)
    if not isinstance(item, str) or not item.strip():
        return "is not a non-empty string"
    try:
        if kind is Kind.OBJECT:
            import_string(item)
        elif kind is Kind.MODULE:
            import_module(item)
        elif kind is Kind.CHOICES and not (isinstance(found := import_string(item), type)
                                           and issubclass(found, TextChoices)):
            return f"is not a TextChoices class (found {found!r})"
        elif kind is Kind.URL:
            reverse(item.split("?", 1)[0])
    except ImportError as exc:
        return f"cannot be imported ({exc})"
    except NoReverseMatch:
        return "is not a URL name"
    return None


def _roles_problem(roles) -> str | None:
    from memweb.roles import Role  # memweb.roles reads this module at import

    if not isinstance(roles, tuple) or any(str(role) not in Role.values for role in roles):
        return f"is not a tuple of roles ({', '.join(Role.values)})"
    return None


def _permission_errors(config: AppConfig) -> list[checks.Error]:
    from memweb.roles import Role

    granted = getattr(config, "role_permissions", {})
    if not isinstance(granted, dict):
        return [_error(config, "role_permissions", f"must be a dict of role to permissions, got {granted!r}")]
    return [_error(config, "role_permissions", f"{role!r}: {perms!r} is not a tuple of \"app_label.codename\"")
            for role, perms in granted.items()
            if role not in Role.values or not isinstance(perms, tuple)
            or not all(isinstance(perm, str) and perm.count(".") == 1 for perm in perms)]


def _vocabulary_clashes(configs: list[AppConfig]) -> list[checks.Error]:
    """A scope, event or LLM role declared twice would be one word with two owners."""
    errors = []
    for attribute in ("api_scopes", "webhook_events", "llm_roles"):
        owner: dict[str, str] = {}
        for config in configs:
            for path in getattr(config, attribute, ()):
                for value in _values_of(path):
                    if value in owner:
                        errors.append(_error(config, attribute, f"{value!r} is declared by {owner[value]} too"))
                    owner[value] = config.name
    return errors


def _values_of(path) -> list[str]:
    try:
        found = import_string(path) if isinstance(path, str) else None
    except ImportError:
        found = None  # reported by _item_problem
    return list(found.values) if isinstance(found, type) and issubclass(found, TextChoices) else []


def _error(config: AppConfig, attribute: str, problem: str) -> checks.Error:
    return checks.Error(f"{config.name}: {config.__class__.__name__}.{attribute}: {problem}",
                        hint=f"see memweb.registry and docs/ARCHITECTURE.md ({attribute})", obj=config,
                        id="memweb.E001")
