"""Task versions: the content hash covers the gradable content only, in a canonical form, and an edit
or re-import makes a new version exactly when that content changed, keeping the old one's spec."""
import copy
import hashlib
import json

from evaluation.models import Task, TaskVersion
from evaluation.services import task_spec_update, tasks_import_jsonl
from evaluation.shop.task_content import task_content_changes, task_content_hash


def test_it_hashes_the_gradable_content_in_its_documented_canonical_form(shop_tasks):
    spec = shop_tasks[0]
    groups = {"instruction": ("instructions", "customer_id", "persona", "intents", "known", "unknown"),
              "gold_actions": ("gold_actions", "shop_seed"), "gold_lookups": ("gold_lookups",),
              "required_outputs": ("required_outputs",)}
    canonical = json.dumps({group: {name: spec[name] for name in names} for group, names in groups.items()},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert task_content_hash(spec) == hashlib.sha256(canonical.encode()).hexdigest()
    reordered = dict(reversed(list(spec.items())))
    relabelled = {**spec, "split": "test", "difficulty": "hard", "error_kinds": [], "template": "other"}
    assert task_content_hash(reordered) == task_content_hash(relabelled) == task_content_hash(spec)
    edited = copy.deepcopy(spec)
    edited["required_outputs"][0]["value"] = "somewhere else"
    assert task_content_hash(edited) != task_content_hash(spec)
    assert task_content_changes(spec, edited) == ["required_outputs"]
    assert task_content_changes(spec, {**edited, "instructions": "Be brief."}) == ["instruction", "required_outputs"]


def test_a_reimport_makes_a_new_version_only_when_the_content_changed(builtin):
    spec = builtin.tasks.get(external_id="shop-app-001").spec
    tasks_import_jsonl(text=json.dumps(spec), task_set_name="mine")
    task = Task.objects.get(task_set__name="mine")
    assert (task.version, task.content_hash) == (1, task_content_hash(spec))
    same = tasks_import_jsonl(text=json.dumps(spec), task_set_name="mine")
    relabelled = tasks_import_jsonl(text=json.dumps({**spec, "difficulty": "hard"}), task_set_name="mine")
    assert (same.updated, same.new_versions, relabelled.new_versions) == (1, 0, 0)
    task.refresh_from_db()
    assert task.version == 1 and task.difficulty == "hard"
    edited = {**spec, "instructions": spec["instructions"] + " Ask twice."}
    report = tasks_import_jsonl(text=json.dumps(edited), task_set_name="mine")
    task.refresh_from_db()
    assert report.new_versions == 1 and task.version == 2 and task.content_hash == task_content_hash(edited)
    kept = {version.number: version for version in TaskVersion.objects.filter(task=task)}
    assert sorted(kept) == [1, 2] and kept[1].spec["instructions"] == spec["instructions"]
    assert kept[1].content_hash == task_content_hash(spec) and kept[2].spec == edited
    assert not task_spec_update(task=task, spec=edited)  # the same content again: no version
    assert TaskVersion.objects.filter(task=task).count() == 2


def test_the_task_page_and_api_show_the_version(client, operator_user, builtin):
    task = builtin.tasks.get(external_id="shop-app-001")
    task_spec_update(task=task, spec={**task.spec, "gold_lookups": task.spec["gold_lookups"][:1]})
    client.force_login(operator_user)
    page = client.get(task.get_absolute_url()).content.decode()
    assert "v2 · content hash <span class=\"mono\"" in page and task.content_hash[:12] in page
    answer = client.get(f"/api/evaluation/tasks/{task.pk}").json()
    assert (answer["version"], answer["content_hash"]) == (2, task.content_hash)
