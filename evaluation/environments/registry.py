"""Which environments exist: the built-in ones, which the evaluation app registers when it starts
(`environment_register`), and those other Python packages declare under the entry-point group
`memweb.environments` (each entry point names an Environment object, `package.module:OBJECT`).

Entry points are read once and kept; `environments_refresh()` reads them again (a package installed
since, as the tests do)."""
import importlib
import logging
from importlib.metadata import entry_points

from evaluation.environments.protocol import Environment

ENTRY_POINT_GROUP = "memweb.environments"
DEFAULT_ENVIRONMENT = "shop"

_registered: dict[str, str] = {}  # name -> "module:attribute", the built-ins
_discovered: dict[str, str] | None = None  # name -> "module:attribute", from entry points
_loaded: dict[str, Environment] = {}
logger = logging.getLogger(__name__)


class UnknownEnvironment(LookupError):
    pass


def environment_register(name: str, target: str) -> None:
    """Register a built-in environment by where its object lives ("module:attribute"), loaded when
    first asked for."""
    _registered[name] = target
    _loaded.pop(name, None)


def environments_refresh() -> None:
    """Forget what the entry points said and the environments loaded from them."""
    global _discovered
    _discovered = None
    _loaded.clear()
    importlib.invalidate_caches()


def _targets() -> dict[str, str]:
    global _discovered
    if _discovered is None:
        _discovered = {point.name: point.value for point in entry_points(group=ENTRY_POINT_GROUP)}
    return {**_discovered, **_registered}  # a package cannot replace a built-in


def environment_names() -> list[str]:
    return sorted(_targets())


def environment(name: str = DEFAULT_ENVIRONMENT) -> Environment:
    """The environment registered as `name`; UnknownEnvironment names the ones there are."""
    if name not in _loaded:
        target = _targets().get(name)
        if target is None:
            raise UnknownEnvironment(f"unknown environment {name!r}; known: {', '.join(environment_names()) or 'none'}")
        _loaded[name] = _load(name, target)
    return _loaded[name]


def environments() -> list[Environment]:
    """Every environment that loads. A third-party package that fails to (an import error, or an
    object that is no environment) is left out and logged, so the pages listing environments still
    work; asking for it by name says why."""
    found = []
    for name in environment_names():
        try:
            found.append(environment(name))
        except Exception as exc:  # any error of a third-party package's import
            if name in _registered:
                raise
            logger.warning("environment entry point %s: %s: %s", name, type(exc).__name__, exc)
    return found


def _load(name: str, target: str) -> Environment:
    module_name, _, attribute = target.partition(":")
    found = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    if not isinstance(found, Environment) or found.name != name:
        raise UnknownEnvironment(f"environment {name!r} ({target}) is not an environment object named {name!r}")
    return found
