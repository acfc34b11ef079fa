"""Typed readers for environment variables.

Each helper raises ImproperlyConfigured naming the variable and the values it
accepts, so a typo stops start-up with a message instead of a silent default.
"""
import ipaddress
import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_HOST_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use one of: {', '.join(sorted(_TRUE | _FALSE))}"
    )


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    _check_range(name, value, minimum, maximum)
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    _check_range(name, value, minimum, maximum)
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated addresses or CIDR networks (`10.0.0.5`, `10.0.0.0/8`, `::1`); empty when unset."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name} entry {item!r} is not an IP address or network (e.g. 10.0.0.0/8)") from None
    return tuple(networks)


def env_hosts(name: str) -> list[str]:
    """Comma-separated host names, addresses or networks (10.0.0.0/8), lower-cased, IPv6 without brackets."""
    entries = [entry.lower().strip("[]").rstrip(".") for entry in env_list(name, [])]
    for entry in entries:
        if not _HOST_NAME.match(entry):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ImproperlyConfigured(
                    f"{name}: {entry!r} is neither a host name nor an address or network (e.g. 10.0.0.0/8)"
                ) from None
    return entries


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not accepted; use one of: {', '.join(choices)}")
    return value


def _check_range(name, value, minimum, maximum) -> None:
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
