"""Install pgvector, with an error that says what to do when the server lacks it."""
from django.db import migrations


def create_vector_extension(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            raise RuntimeError(
                "The PostgreSQL server at DATABASE_URL has no pgvector extension. Install pgvector on that "
                "server (managed clouds ship it; Debian: build it from source) or unset DATABASE_URL to use "
                "memweb's embedded PostgreSQL, which includes it."
            )
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")


class Migration(migrations.Migration):
    dependencies = [("memweb", "0001_initial")]
    operations = [migrations.RunPython(create_vector_extension, migrations.RunPython.noop)]
