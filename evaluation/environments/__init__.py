"""Task worlds as plug-ins: the Environment protocol (protocol.py), the registry of built-in and
installed environments (registry.py), the episode loop every environment plays through
(episode.py) and the recorded tool world (world.py). The shop's adapter is shop.py. Django-free."""
from evaluation.environments.protocol import (
    DEFAULT_MAX_TURNS,
    ERROR_KINDS,
    STOP,
    Environment,
    RewardResult,
    ToolResult,
)
from evaluation.environments.registry import (
    DEFAULT_ENVIRONMENT,
    ENTRY_POINT_GROUP,
    UnknownEnvironment,
    environment,
    environment_names,
    environment_register,
    environments,
    environments_refresh,
)

__all__ = ["DEFAULT_ENVIRONMENT", "DEFAULT_MAX_TURNS", "ENTRY_POINT_GROUP", "ERROR_KINDS", "STOP", "Environment",
           "RewardResult", "ToolResult", "UnknownEnvironment", "environment", "environment_names",
           "environment_register", "environments", "environments_refresh"]
