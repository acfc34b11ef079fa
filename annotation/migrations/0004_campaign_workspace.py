# Existing rows go into the default workspace: the field's default (memweb.models.default_workspace_id).

import django.db.models.deletion
import memweb.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0003_item_provenance'),
        ('memweb', '0008_workspaces'),
    ]

    operations = [
        migrations.AddField(
            model_name='campaign',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='campaigns', to='memweb.workspace'),
        ),
    ]
