# Existing rows go into the default workspace: the field's default (memweb.models.default_workspace_id).

import django.db.models.deletion
import memweb.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memweb', '0008_workspaces'),
        ('orbs', '0016_history_chain'),
    ]

    operations = [
        migrations.AddField(
            model_name='memorybank',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='banks', to='memweb.workspace'),
        ),
    ]
