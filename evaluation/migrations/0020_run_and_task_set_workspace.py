# Existing rows go into the default workspace: the field's default (memweb.models.default_workspace_id).

import django.db.models.deletion
import memweb.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0019_run_pins_and_regrades'),
        ('memweb', '0008_workspaces'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='memweb.workspace'),
        ),
        migrations.AddField(
            model_name='taskset',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='task_sets', to='memweb.workspace'),
        ),
        migrations.AlterField(
            model_name='taskset',
            name='name',
            field=models.CharField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name='taskset',
            constraint=models.UniqueConstraint(fields=('workspace', 'name'), name='task_set_unique_name'),
        ),
    ]
