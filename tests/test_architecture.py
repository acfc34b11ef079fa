"""The import graph keeps the stack of docs/ARCHITECTURE.md: each level imports only the levels below
it, so no two packages import each other. Imports inside functions count as much as top-level ones."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("memweb", "orbs", "evaluation", "annotation")

# Lowest first; a module belongs to the most specific level whose prefix it carries.
LEVELS = (
    "memweb",
    "evaluation.environments",
    "evaluation.shop",
    "evaluation.environments.shop",
    "annotation",
    "orbs",
    "orbs.dmrm",
    # The memory layers' registry sits under the core, which asks it for a layer by name; the layers
    # themselves build on the runs, above them all (the registry imports them by their dotted paths).
    "evaluation.memory_layers.registry",
    "evaluation",
    "evaluation.feedback",
    "evaluation.runs",
    "evaluation.scores",
    "evaluation.memory_layers",
)
# Composition: these modules mount the routers, URLs, models and Celery tasks of the levels above them
# (custom_scores: the template tags that put evaluation.scores' cards on the core's and the runs' pages).
COMPOSITION = {"memweb.urls", "memweb.api", "orbs.urls", "orbs.api", "orbs.apps", "evaluation.urls", "evaluation.api",
               "evaluation.apps", "evaluation.templatetags.custom_scores"}
# The Django-free simulator and the environment protocol beneath it: nothing from Django or from
# memweb's own packages above them.
DJANGO_FREE = ("evaluation.environments", "evaluation.shop", "evaluation.environments.shop")
# An environment's own package: only these modules import the shop (the rest goes through
# evaluation.environments.environment("shop")). Old migrations keep their historical imports.
SHOP_PACKAGE = ("evaluation.shop", "evaluation.environments.shop")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    if not node.level:
        return [node.module]
    base = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
    target = ".".join(base + ([node.module] if node.module else []))
    return [target] if node.module else [f"{target}.{alias.name}" for alias in node.names]


def _imports(path: Path, module: str):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield from ((target, node.lineno) for target in _resolve(module, path, node))


def import_edges() -> list[tuple[str, str, str]]:
    """(importing module, imported module, "file:line") for every import in the apps' code."""
    edges = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            module = _module_name(path)
            edges += [(module, target, f"{path.relative_to(ROOT)}:{line}") for target, line in _imports(path, module)]
    return edges


def level_of(module: str) -> str | None:
    matching = [level for level in LEVELS if module == level or module.startswith(f"{level}.")]
    return max(matching, key=len, default=None)


def test_it_imports_only_downwards_through_the_stack():
    upward = [
        f"{where}: {source} ({level_of(source)}) imports {target} ({level_of(target)})"
        for source, target, where in import_edges()
        if source not in COMPOSITION and level_of(target) is not None
        and LEVELS.index(level_of(target)) > LEVELS.index(level_of(source))
    ]
    assert not upward, "imports against the stack of docs/ARCHITECTURE.md:\n" + "\n".join(upward)


def test_it_keeps_annotation_on_memweb_alone():
    outside = [f"{where}: {target}" for source, target, where in import_edges()
               if level_of(source) == "annotation" and level_of(target) not in (None, "memweb", "annotation")]
    assert not outside, outside


def test_it_keeps_the_shop_simulator_free_of_django():
    coupled = [f"{where}: {target}" for source, target, where in import_edges()
               if level_of(source) in DJANGO_FREE
               and (target.split(".")[0] == "django" or level_of(target) not in (None, *DJANGO_FREE))]
    assert not coupled, coupled


def shop_importers(edges) -> list[str]:
    """Imports of the shop from outside its environment's package."""
    return [f"{where}: {source} imports {target}" for source, target, where in edges
            if level_of(target) == "evaluation.shop" and level_of(source) not in SHOP_PACKAGE]


def test_only_the_shops_environment_package_imports_the_shop():
    edges = import_edges() + [edge for path in sorted((ROOT / "bench").rglob("*.py"))
                              for edge in _edges_of(path)]
    found = shop_importers(edges)
    assert not found, "reach the shop through evaluation.environments.environment(\"shop\"):\n" + "\n".join(found)


def test_it_finds_a_shop_import_when_one_is_planted(tmp_path):
    planted = tmp_path / "evaluation" / "services" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("def play():\n    from evaluation.shop.episode import episode_play\n")
    found = shop_importers([("evaluation.services.planted", target, f"planted.py:{line}")
                            for target, line in _imports(planted, "evaluation.services.planted")])
    assert found == ["planted.py:2: evaluation.services.planted imports evaluation.shop.episode"]


def _edges_of(path: Path) -> list[tuple[str, str, str]]:
    module = _module_name(path)
    return [(module, target, f"{path.relative_to(ROOT)}:{line}") for target, line in _imports(path, module)]


def test_it_finds_an_upward_import_when_one_is_planted(tmp_path):
    """The walker itself works: a function-level import from memweb into runs is caught."""
    planted = tmp_path / "memweb" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("def beat():\n    from evaluation.runs.services import runs_watch_overdue\n")
    found = list(_imports(planted, "memweb.planted"))
    assert found == [("evaluation.runs.services", 2)]
    assert LEVELS.index(level_of(found[0][0])) > LEVELS.index(level_of("memweb.planted"))


def private_imports(path: Path, module: str) -> list[str]:
    """`from x import _name` of another module's private name (dunders are Python's, not private)."""
    return [f"{node.lineno}: from {target} import {alias.name}"
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
            if isinstance(node, ast.ImportFrom) and node.module
            for target in [_resolve(module, path, node)[0]]
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_another_modules_private_names():
    found = [f"{path.relative_to(ROOT)}:{line}"
             for app in APPS for path in sorted((ROOT / app).rglob("*.py")) if "migrations" not in path.parts
             for line in private_imports(path, _module_name(path))]
    assert not found, "a module's _private names are its own; make the name public or move it:\n" + "\n".join(found)


def test_it_finds_a_private_import_when_one_is_planted(tmp_path):
    planted = tmp_path / "orbs" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("from orbs.services.ingest import OrbDraft, _hidden\nfrom os import __file__\n")
    assert private_imports(planted, "orbs.planted") == ["1: from orbs.services.ingest import _hidden"]


LLM_ROLE_NAMES = {"actor", "user_simulator", "rewriter", "reflector", "scorer"}
LLM_ROLE_TAKERS = {"role_config", "_require_online", "_backend_pin", "llm_chat", "llm_json", "run_with_fallback"}


def bare_llm_roles(path: Path) -> list[str]:
    """String literals naming an LLM role where a role is given: `role="actor"`, `ROLE = "reflector"`,
    `role_config("scorer")`, a tuple beside a backend, a `role: str = "actor"` default. The roles are
    the apps' enums (memweb.registry.llm_roles)."""
    def is_role(node) -> bool:
        return isinstance(node, ast.Constant) and node.value in LLM_ROLE_NAMES

    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            given = [kw.value for kw in node.keywords if kw.arg == "role"]
            given += node.args[-1:] if name in LLM_ROLE_TAKERS else []
            found += [f"{node.lineno}: {value.value!r}" for value in given if is_role(value)]
        elif isinstance(node, ast.Assign) and is_role(node.value):
            found += [f"{node.lineno}: {node.value.value!r}" for target in node.targets
                      if isinstance(target, ast.Name) and target.id.endswith("ROLE")]
        elif isinstance(node, ast.arguments):
            named = node.args[len(node.args) - len(node.defaults):] + node.kwonlyargs
            defaults = [*node.defaults, *node.kw_defaults]
            found += [f"{arg.lineno}: {default.value!r}" for arg, default in zip(named, defaults, strict=False)
                      if arg.arg == "role" and is_role(default)]
        elif isinstance(node, ast.Compare) and any(is_role(value) for value in node.comparators):
            found += [f"{node.lineno}: compared with {node.comparators[0].value!r}"]
    return found


def test_llm_roles_are_named_by_their_apps_enums():
    found = [f"{path.relative_to(ROOT)}:{line}"
             for app in APPS for path in sorted((ROOT / app).rglob("*.py")) if "migrations" not in path.parts
             for line in bare_llm_roles(path)]
    assert not found, "name an LLM role by its app's enum (orbs/evaluation vocabulary.py):\n" + "\n".join(found)


def test_it_finds_a_bare_llm_role_when_one_is_planted(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('ROLE = "reflector"\nllm_json(role="scorer", messages=[])\nrole_config("actor")\n'
                       'def f(*, role: str = "user_simulator"): return role == "rewriter"\n'
                       'event = {"actor": 1}\n')
    assert bare_llm_roles(planted) == ["1: 'reflector'", "2: 'scorer'", "3: 'actor'", "4: 'user_simulator'",
                                       "4: compared with 'rewriter'"]


def schemas_defined(path: Path) -> list[str]:
    """Classes an API module defines on ninja's Schema or memweb's StrictBody (directly or through
    another such class of the same module)."""
    found: list[str] = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        bases = {getattr(base, "id", getattr(base, "attr", "")) for base in getattr(node, "bases", ())}
        if isinstance(node, ast.ClassDef) and bases & {"Schema", "StrictBody", *found}:
            found.append(node.name)
    return found


def test_api_schemas_live_in_the_packages_schemas_module():
    found = [f"{path.relative_to(ROOT)}: {', '.join(names)}"
             for app in APPS for path in sorted((ROOT / app).rglob("*api.py")) if (names := schemas_defined(path))]
    assert not found, "move these request/answer schemas into the package's schemas.py:\n" + "\n".join(found)


def test_one_error_answer_schema():
    """`{"detail": a sentence}` is memweb.schemas.ErrorOut; no app declares its own copy."""
    copies = [f"{path.relative_to(ROOT)}: {name}"
              for app in APPS for path in sorted((ROOT / app).rglob("*.py")) if path != ROOT / "memweb" / "schemas.py"
              for name in schemas_defined(path) if name in ("ErrorOut", "RunErrorOut")]
    assert not copies, copies


# --- memory layers: what a kind of memory does is its layer's own (evaluation/memory_layers/) ---------
MEMORY_LAYERS_PACKAGE = ROOT / "evaluation" / "memory_layers"
MEMORY_KIND_NAMES = {"none", "memorb", "dmrm", "both", "bm25_message", "bm25_dialog", "embedder_message",
                     "embedder_dialog"}
MEMORY_KIND_ENUMS = {"MemoryKind", "MemoryMode"}
# The run flags that once said what a kind does; the layer says it now.
MEMORY_KIND_FLAGS = {"uses_memorb", "uses_dmrm", "uses_dialogues"}
TEMPLATE_KIND_BRANCH = re.compile(r"memory_(?:mode|kind)\s*[!=]=|\buses_(?:memorb|dmrm|dialogues)\b|_KINDS\b")


def _names_a_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") in MEMORY_KIND_ENUMS:
        return True
    name = getattr(node, "id", getattr(node, "attr", ""))
    return name.endswith("_KINDS") or (isinstance(node, (ast.Tuple, ast.List, ast.Set))
                                       and any(_names_a_kind(item) for item in node.elts))


def memory_kind_branches(path: Path) -> list[str]:
    """Comparisons against a memory kind (`MemoryKind.DMRM`, a `*_KINDS` tuple, or `memory_mode ==
    "memorb"`) and the old per-kind run flags."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            text = ast.unparse(node)
            by_name = ("memory_mode" in text or "memory_kind" in text or "kind" in text) and any(
                isinstance(o, ast.Constant) and o.value in MEMORY_KIND_NAMES for o in operands)
            if by_name or any(_names_a_kind(o) for o in operands):
                found.append(f"{node.lineno}: {text}")
        elif isinstance(node, ast.Attribute) and node.attr in MEMORY_KIND_FLAGS:
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_no_module_outside_the_memory_layers_branches_on_a_memory_kind():
    found = [f"{path.relative_to(ROOT)}:{line}"
             for app in APPS for path in sorted((ROOT / app).rglob("*.py"))
             if "migrations" not in path.parts and MEMORY_LAYERS_PACKAGE not in path.parents
             for line in memory_kind_branches(path)]
    found += [f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
              for path in sorted((ROOT / "templates").rglob("*.html"))
              for number, line in enumerate(path.read_text().splitlines(), 1)
              for match in [TEMPLATE_KIND_BRANCH.search(line)] if match]
    assert not found, "ask the run's memory layer instead of branching on its kind:\n" + "\n".join(found)


def test_it_finds_a_memory_kind_branch_when_one_is_planted(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('if run.memory_mode == "dmrm": pass\nif spec.memory_mode in (MemoryKind.NONE, *NAIVE_RAG_KINDS): pass\n'
                       'if run.uses_memorb: pass\nif kind is MemoryMode.BOTH: pass\nif run.status == "done": pass\n')
    assert [line.split(":")[0] for line in memory_kind_branches(planted)] == ["1", "2", "3", "4"]
    assert TEMPLATE_KIND_BRANCH.search('{% if run.memory_mode != "none" %}')
