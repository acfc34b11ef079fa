"""Which memory layers exist: the built-in ones, named by the apps' `memory_layers` attribute (dotted
paths to MemoryLayer classes, evaluation/apps.py), and third-party ones, found through the Python
entry-point group `memweb.memory_layers` (an installed package adds a layer without touching memweb).

This module sits low in the import stack (tests/test_architecture.py): the evaluation core and the
runs ask it for a layer by name and never import a layer's module, so the layers themselves may
build on the runs. Classes are imported on the first lookup, not at start-up.
"""
import copy
import logging
from importlib.metadata import entry_points

from django.apps import apps
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "memweb.memory_layers"
NO_MEMORY = "none"  # the layer every run without memory names: the default of a run and an episode

_found: dict | None = None
_broken: dict[str, str] = {}  # entry-point name -> why it failed to load


class UnknownMemoryLayer(LookupError):
    """A name no installed layer answers to; the message lists the known ones."""


def _builtin_layers() -> list:
    return [import_string(path) for config in apps.get_app_configs()
            for path in getattr(config, "memory_layers", ())]


def _entry_point_layers() -> list:
    """Each entry point names a MemoryLayer class (or an instance). A package that fails to import
    is left out and logged, so the other layers still work; asking for it by name says why."""
    loaded = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded.append(point.load())
        except Exception as exc:  # any import error of a third-party package
            _broken[point.name] = f"{point.value} failed to load: {type(exc).__name__}: {exc}"
            logger.warning("memory layer entry point %s: %s", point.name, _broken[point.name])
    return loaded


def memory_layers() -> dict:
    """Every installed layer by name, built-ins first (a third-party layer cannot replace one)."""
    global _found
    if _found is None:
        found = {}
        for given in _builtin_layers() + _entry_point_layers():
            layer = given() if isinstance(given, type) else given
            found.setdefault(layer.name, layer)
        _found = found
    return _found


def memory_layers_refresh() -> None:
    """Forget what was found, so the next lookup sees packages installed since (tests, a reload)."""
    global _found
    _found = None
    _broken.clear()


def memory_layer(name: str):
    """The layer registered as `name`; UnknownMemoryLayer naming the known ones otherwise."""
    layers = memory_layers()
    if name in _broken:
        raise UnknownMemoryLayer(f"memory layer {name!r} is installed but {_broken[name]}")
    if name not in layers:
        raise UnknownMemoryLayer(f"unknown memory layer {name!r}; the known layers are {', '.join(layers)}")
    return layers[name]


def memory_layer_or_stand_in(name: str):
    """The layer registered as `name`, or, for a run whose layer is not installed (any more), a stand-in
    that remembers nothing and says so in its label, so the run's pages still open. Playing such a run
    still fails: its episodes' memory configuration names the missing layer."""
    try:
        return memory_layer(name)
    except UnknownMemoryLayer as missing:
        stand_in = copy.copy(memory_layer(NO_MEMORY))
        stand_in.name, stand_in.label, stand_in.missing = name, f"{name} (not installed)", str(missing)
        return stand_in


def memory_layer_validate(name: str) -> str:
    """`name` when a layer is registered under it; a ValueError (a validation message) otherwise."""
    try:
        return memory_layer(str(name)).name
    except UnknownMemoryLayer as exc:
        raise ValueError(str(exc)) from None


def memory_layer_choices() -> list[tuple[str, str]]:
    """(name, label) of every layer, for forms and filters."""
    return [(name, layer.label) for name, layer in memory_layers().items()]


def memory_layer_label(name: str) -> str:
    """The layer's label, or its name marked "not installed" (an old run's layer, since removed)."""
    layer = memory_layers().get(name)
    return layer.label if layer else f"{name} (not installed)"
