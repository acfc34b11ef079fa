"""Task versions: every task gets version 1 with the content hash of its spec as it is today."""
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

from evaluation.shop.task_content import task_content_hash


def versions_backfill(apps, schema_editor):
    Task, TaskVersion = apps.get_model("evaluation", "Task"), apps.get_model("evaluation", "TaskVersion")
    versions = []
    for task in Task.objects.only("pk", "spec").iterator(chunk_size=500):
        task.content_hash = task_content_hash(task.spec)
        task.save(update_fields=["content_hash"])
        versions.append(TaskVersion(task=task, number=1, content_hash=task.content_hash, spec=task.spec))
    TaskVersion.objects.bulk_create(versions, batch_size=500)


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0017_run_cancelled_and_imported_feedback"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="version",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="task",
            name="content_hash",
            field=models.CharField(default="", help_text="SHA-256 of the gradable content of the current version.",
                                   max_length=64),
            preserve_default=False,
        ),
        migrations.CreateModel(
            name="TaskVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("number", models.PositiveIntegerField()),
                ("content_hash", models.CharField(max_length=64)),
                ("spec", models.JSONField(help_text="The whole spec as this version had it.")),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("task", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="versions",
                                           to="evaluation.task")),
            ],
            options={
                "ordering": ["task", "number"],
                "constraints": [models.UniqueConstraint(fields=("task", "number"), name="task_version_unique_number")],
            },
        ),
        migrations.RunPython(versions_backfill, migrations.RunPython.noop),
    ]
