"""A run's settings become one value: `spec` (its RunSpec, validated) and `spec_version`. Every
existing run, imported ones included, gets the spec its setting columns say; then the columns go,
except those lists filter and sort on and the results (tasks, pins, DMRM parameters in force...).
Reversing writes the columns back from the spec."""
from django.db import migrations, models

from evaluation.runs.services.spec import SPEC_VERSION, run_spec_stored, spec_from_columns

# The setting columns this migration removes, by their RunSpec field where the name differs.
_RENAMED = {"task_domain": "domain", "task_split": "split", "agent_config": "agent", "customer_config": "customer",
            "memory_approved_only": "approved_only", "memory_same_customer_only": "same_customer_only",
            "memory_per_turn": "per_turn"}
_SAME = ("task_ids", "memory_k", "reflection_style", "reflection_input", "withhold_probability", "trials", "pass_k",
         "seed", "max_turns", "concurrency", "review_gate", "feedback_enabled", "feedback_memory", "feedback_rounds",
         "feedback_calibration")
_HELD_OUT = ("evaluation_mode", "split_rule", "test_fraction", "train_trials")
# Read too: the preset (removed, written back on its own) and columns that stay.
_ALSO_READ = ("preset", "name", "memory_mode", "bank_copied_from", "dmrm_config")


def specs_from_columns(apps, schema_editor):
    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    for run in EvaluationRun.objects.select_related("task_set").iterator():
        columns = {name: getattr(run, name) for name in (*_RENAMED, *_SAME, *_HELD_OUT, *_ALSO_READ)}
        columns["task_set"] = run.task_set.name if run.task_set_id else ""
        spec, _defaulted = spec_from_columns(columns)
        run.spec, run.spec_version = run_spec_stored(spec), SPEC_VERSION
        run.save(update_fields=["spec", "spec_version"])


def _held_out_columns(spec: dict) -> dict:
    """Replay runs kept the held-out columns empty (as they were before this migration)."""
    if spec.get("evaluation_mode", "replay") == "replay":
        return {"evaluation_mode": "replay", "split_rule": "", "test_fraction": 0.0, "train_trials": 0}
    by_fraction = spec.get("split_rule") == "fraction"
    return {"evaluation_mode": spec["evaluation_mode"], "split_rule": spec.get("split_rule", ""),
            "test_fraction": spec.get("test_fraction", 0.0) if by_fraction else 0.0,
            "train_trials": spec.get("train_trials") or 0}


def columns_from_specs(apps, schema_editor):
    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    for run in EvaluationRun.objects.iterator():
        spec = run.spec or {}
        values = {column: spec[field] for column, field in _RENAMED.items() if field in spec}
        values.update({name: spec[name] for name in _SAME if name in spec})
        values.update(_held_out_columns(spec))
        values["preset"] = spec.get("preset") or ""
        for name, value in values.items():
            setattr(run, name, value)
        run.save(update_fields=list(values))


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0027_task_environment'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='spec',
            field=models.JSONField(blank=True, default=dict, help_text="The run's settings: its RunSpec, as stored."),
        ),
        migrations.AddField(
            model_name='evaluationrun',
            name='spec_version',
            field=models.PositiveSmallIntegerField(
                default=1, help_text='The shape of `spec` (evaluation.runs.services.spec.SPEC_VERSION when stored).'),
        ),
        migrations.RunPython(specs_from_columns, columns_from_specs),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='agent_config',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='concurrency',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='customer_config',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='evaluation_mode',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='feedback_calibration',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='feedback_enabled',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='feedback_memory',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='feedback_rounds',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='max_turns',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='memory_approved_only',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='memory_k',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='memory_per_turn',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='memory_same_customer_only',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='pass_k',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='preset',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='reflection_input',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='reflection_style',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='review_gate',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='seed',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='split_rule',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='task_domain',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='task_ids',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='task_split',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='test_fraction',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='train_trials',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='trials',
        ),
        migrations.RemoveField(
            model_name='evaluationrun',
            name='withhold_probability',
        ),
    ]
