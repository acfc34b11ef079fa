"""Per-role LLM endpoint configuration, read once from the environment.

The roles are the apps' (memweb.registry.llm_roles: TextChoices members with a `max_tokens`
default); memweb only reads their settings. Every role falls back to the MEMWEB_LLM_* defaults and can be overridden with
MEMWEB_LLM_<ROLE>_*; a role without a base URL runs on its offline backend.
"""
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.db.models import TextChoices

from memweb.env import env_bool, env_float, env_int, env_str


class JsonMode(TextChoices):
    """How a JSON role hands its schema to the server; each server understands another form."""

    AUTO = "auto", "probe the server once"
    JSON_SCHEMA = "json_schema", "OpenAI response_format json_schema"
    JSON_OBJECT_SCHEMA = "json_object_schema", "json_object with a schema (llama-cpp-python)"
    OLLAMA_FORMAT = "ollama_format", "Ollama's format field"
    PROMPT_ONLY = "prompt_only", "schema in the prompt only"


class ToolChoice(TextChoices):
    AUTO = "auto", "the model decides (OpenAI's default)"
    REQUIRED = "required", "a tool call every turn"
    OMIT = "omit", "not sent, for servers that reject the field"


@dataclass(frozen=True)
class RoleConfig:
    role: str
    base_url: str
    api_key: str
    model: str
    temperature: float
    timeout: float
    max_retries: int
    max_tokens: int = 512
    tool_choice: str = ToolChoice.AUTO
    json_mode: str = JsonMode.AUTO
    stream: bool = True

    @property
    def is_offline(self) -> bool:
        return not self.base_url

    @property
    def backend_label(self) -> str:
        return "offline (scripted)" if self.is_offline else f"{self.model} @ {self.base_url}"


def _var(role: str, field: str) -> str:
    return f"MEMWEB_LLM_{role.upper()}_{field}"


def _role_str(role: str, field: str, default: str) -> str:
    return env_str(_var(role, field)) or env_str(f"MEMWEB_LLM_{field}", default)


def _role_float(role: str, field: str, default: float, **bounds) -> float:
    shared = env_float(f"MEMWEB_LLM_{field}", default, **bounds)
    return env_float(_var(role, field), shared, **bounds)


def _role_int(role: str, field: str, default: int, **bounds) -> int:
    shared = env_int(f"MEMWEB_LLM_{field}", default, **bounds)
    return env_int(_var(role, field), shared, **bounds)


def _role_bool(role: str, field: str, default: bool) -> bool:
    return env_bool(_var(role, field), env_bool(f"MEMWEB_LLM_{field}", default))


def _role_choice(role: str, field: str, choices: type[TextChoices], default: str) -> str:
    value = _role_str(role, field, default).lower()
    if value not in choices.values:
        raise ImproperlyConfigured(
            f"{_var(role, field)} (or MEMWEB_LLM_{field}) = {value!r} is not one of: {', '.join(choices.values)}")
    return value


def declared_role(role: str) -> TextChoices:
    """The app-declared LLM role called `role`, or ValueError naming the known ones."""
    from memweb.registry import llm_roles  # the registry reads the apps, loaded after the settings

    known = {member.value: member for member in llm_roles()}
    if role not in known:
        raise ValueError(f"unknown LLM role {role!r}; known roles: {', '.join(known)}")
    return known[role]


def read_role_config(role: str) -> RoleConfig:
    role = declared_role(role)
    return RoleConfig(
        role=role.value,
        base_url=_role_str(role, "BASE_URL", ""),
        api_key=_role_str(role, "API_KEY", "not-needed"),
        model=_role_str(role, "MODEL", "gpt-4o-mini"),
        temperature=_role_float(role, "TEMPERATURE", 0.0, minimum=0.0, maximum=2.0),
        timeout=_role_float(role, "TIMEOUT", 60.0, minimum=0.1),
        max_retries=_role_int(role, "MAX_RETRIES", 3, minimum=0, maximum=10),
        max_tokens=_role_int(role, "MAX_TOKENS", role.max_tokens, minimum=1, maximum=1_000_000),
        tool_choice=_role_choice(role, "TOOL_CHOICE", ToolChoice, ToolChoice.AUTO),
        json_mode=_role_choice(role, "JSON_MODE", JsonMode, JsonMode.AUTO),
        stream=_role_bool(role, "STREAM", True),
    )


def read_all_roles(roles: list[TextChoices]) -> dict[str, RoleConfig]:
    return {role.value: read_role_config(role.value) for role in roles}


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens."""
    prompt: float
    completion: float

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.prompt + tokens_out * self.completion) / 1_000_000


def read_prices(text: str) -> dict[str, ModelPrice]:
    """MEMWEB_LLM_PRICES: `model=prompt:completion` pairs, comma-separated, in dollars per million
    tokens (`gpt-4o-mini=0.15:0.6,local=0:0`). A model left out has no known price."""
    prices = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        model, _, figures = pair.rpartition("=")
        try:
            prompt, completion = (float(figure) for figure in figures.split(":"))
        except ValueError:
            prompt = completion = -1.0
        if not model or min(prompt, completion) < 0:
            raise ImproperlyConfigured(f"MEMWEB_LLM_PRICES: {pair!r} is not model=prompt:completion with two "
                                       "non-negative dollar figures per million tokens")
        prices[model.strip()] = ModelPrice(prompt, completion)
    return prices
