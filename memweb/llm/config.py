"""Per-role LLM endpoint configuration, read once from the environment.

Every role falls back to the MEMWEB_LLM_* defaults and can be overridden with
MEMWEB_LLM_<ROLE>_*; a role without a base URL runs on its offline backend.
"""
from dataclasses import dataclass

from memweb.env import env_float, env_int, env_str

ROLES = ("actor", "user_simulator", "rewriter", "reflector", "scorer")


@dataclass(frozen=True)
class RoleConfig:
    role: str
    base_url: str
    api_key: str
    model: str
    temperature: float
    timeout: float
    max_retries: int

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


def read_role_config(role: str) -> RoleConfig:
    return RoleConfig(
        role=role,
        base_url=_role_str(role, "BASE_URL", ""),
        api_key=_role_str(role, "API_KEY", "not-needed"),
        model=_role_str(role, "MODEL", "gpt-4o-mini"),
        temperature=_role_float(role, "TEMPERATURE", 0.0, minimum=0.0, maximum=2.0),
        timeout=_role_float(role, "TIMEOUT", 60.0, minimum=0.1),
        max_retries=_role_int(role, "MAX_RETRIES", 3, minimum=0, maximum=10),
    )


def read_all_roles() -> dict[str, RoleConfig]:
    return {role: read_role_config(role) for role in ROLES}
