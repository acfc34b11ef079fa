"""The Django admin site is for superusers only: nobody else keeps the staff flag (workspace admins
made by create_user had it, and with it a way into the admin site)."""

from django.conf import settings
from django.db import migrations


def clear_staff_of_non_superusers(apps, schema_editor):
    users = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    users.objects.filter(is_staff=True, is_superuser=False).update(is_staff=False)


class Migration(migrations.Migration):
    dependencies = [
        ("memweb", "0010_auth_failures"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(clear_staff_of_non_superusers, migrations.RunPython.noop)]
