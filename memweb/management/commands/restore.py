"""Restore a dump written by `manage.py backup` into memweb's database, replacing what it holds.

pg_restore runs as one transaction: a file that breaks half-way (truncated, disk full, a
constraint that fails) leaves the database exactly as it was, never half restored.
"""
import subprocess
from pathlib import Path

from django.core.management import BaseCommand, CommandError
from django.db import connection, connections

from memweb.management.commands.backup import add_pg_bin_argument, database_name, pg_connection, pg_tool

# Every memweb database has this table; a dump without it is some other database's.
MARKER_TABLE = "django_migrations"


def tables_with_rows() -> list[str]:
    """Tables of the public schema that hold at least one row."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        tables = [name for (name,) in cursor.fetchall()]
        filled = []
        for table in tables:
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {table})")  # names quoted by the server above
            if cursor.fetchone()[0]:
                filled.append(table)
    return filled


class Command(BaseCommand):
    help = ("Restore FILE (written by `manage.py backup`) into memweb's database, replacing its contents. "
            "Stop the web server and the workers first.")

    def add_arguments(self, parser):
        parser.add_argument("file", help="a dump written by manage.py backup")
        parser.add_argument("--yes", action="store_true",
                            help="replace the data the database holds now (asked for when it holds any)")
        add_pg_bin_argument(parser)

    def handle(self, *args, file, yes=False, pg_bin=None, **options):
        source = Path(file).expanduser()
        if not source.is_file():
            raise CommandError(f"no backup file {source}")
        restore = pg_tool("pg_restore", pg_bin)
        self._check_archive(restore, source)
        filled = tables_with_rows()
        if filled and not yes:
            raise CommandError(
                f"database {database_name()!r} holds data ({len(filled)} tables with rows, e.g. "
                f"{', '.join(filled[:5])}); restoring replaces it all with the backup. Run again with --yes to do so.")
        with connection.cursor() as cursor:
            # The dump leaves the extension out (see backup.py); its tables need it.
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        connections.close_all()  # hold nothing open while pg_restore replaces the tables
        conninfo, env = pg_connection()
        result = subprocess.run(
            [restore, "--clean", "--if-exists", "--no-owner", "--no-privileges", "--single-transaction",
             f"--dbname={conninfo}", str(source)], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise CommandError(f"restoring {source} failed and was rolled back; the database is unchanged.\n"
                               f"{result.stderr.strip()}")
        self.stdout.write(self.style.SUCCESS(f"Restored {source} into database {database_name()!r}."))
        self.stdout.write("If this memweb is newer than the backup, run `manage.py migrate` before starting it.")

    def _check_archive(self, restore: str, source: Path) -> None:
        """Read the dump's table of contents: a file that is not a readable dump, or not memweb's,
        is refused before anything in the database is touched."""
        listing = subprocess.run([restore, "--list", str(source)], capture_output=True, text=True)
        if listing.returncode != 0:
            reason = listing.stderr.strip().removeprefix("pg_restore: error: ")
            raise CommandError(f"{source} is not a readable backup ({reason})")
        if f" TABLE public {MARKER_TABLE} " not in listing.stdout:
            raise CommandError(f"{source} is a PostgreSQL dump, but not of a memweb database (no {MARKER_TABLE} table)")
