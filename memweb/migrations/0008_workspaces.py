"""Workspaces: a default one holds every existing row, every user's role groups become memberships
of it, and existing API keys keep every scope (they could call every route before)."""

import django.db.models.deletion
import django.utils.timezone
import memweb.models
from django.conf import settings
from django.db import migrations, models


ROLES = ("operator", "reviewer", "annotator", "admin")
SCOPES = ("annotation", "memory:read", "memory:write", "runs:launch", "runs:read", "tasks:read", "tasks:write",
          "webhooks")


def default_workspace_and_memberships(apps, schema_editor):
    Workspace, Membership = apps.get_model("memweb", "Workspace"), apps.get_model("memweb", "Membership")
    Group, ApiKey = apps.get_model("auth", "Group"), apps.get_model("memweb", "ApiKey")
    default, _ = Workspace.objects.get_or_create(slug="default", defaults={"name": "Default"})
    Membership.objects.bulk_create(
        [Membership(workspace=default, user_id=user_id, role=role)
         for role in ROLES for user_id in Group.objects.filter(name=role).values_list("user", flat=True)
         if user_id is not None],
        ignore_conflicts=True,
    )
    ApiKey.objects.update(scopes=list(SCOPES))


class Migration(migrations.Migration):

    dependencies = [
        ('memweb', '0007_llmcall_trace'),
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Workspace',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=60, unique=True)),
                ('name', models.CharField(max_length=100, unique=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('operator', 'Operator'), ('reviewer', 'Reviewer'), ('annotator', 'Annotator'), ('admin', 'Admin')], max_length=16)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='memweb.workspace')),
            ],
            options={
                'ordering': ['workspace__name', 'user__username', 'role'],
                'constraints': [models.UniqueConstraint(fields=('workspace', 'user', 'role'), name='membership_unique_role')],
            },
        ),
        migrations.AddField(
            model_name='apikey',
            name='scopes',
            field=models.JSONField(default=list, help_text='The Scope values this key may use.'),
        ),
        migrations.AddField(
            model_name='apikey',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='api_keys', to='memweb.workspace'),
        ),
        migrations.AddField(
            model_name='job',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='memweb.workspace'),
        ),
        migrations.AddField(
            model_name='webhook',
            name='workspace',
            field=models.ForeignKey(default=memweb.models.default_workspace_id, on_delete=django.db.models.deletion.PROTECT, related_name='webhooks', to='memweb.workspace'),
        ),
        migrations.RunPython(default_workspace_and_memberships, migrations.RunPython.noop),
    ]
