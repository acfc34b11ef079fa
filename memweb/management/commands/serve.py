"""Command 1's second half: prepare the database and run web + worker until Ctrl-C, restarting
whichever of web server, worker and embedded database dies."""
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import deque

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import BaseCommand, call_command

from memweb import embedded_db
from memweb.env import env_int, env_str

WEB_WORKERS = 2  # gunicorn worker processes, each with 4 threads
WATCH_SECONDS = 0.5  # how often the supervisor looks at its processes
RESTART_LIMIT = 5  # restarts of one process within RESTART_WINDOW_SECONDS; one more and serve gives up
RESTART_WINDOW_SECONDS = 300
BACKOFF_MAX_SECONDS = 30


class Command(BaseCommand):
    help = "Migrate, create the admin once, load demo data, then run the web server and a Celery worker."

    def add_arguments(self, parser):
        parser.add_argument("--no-demo", action="store_true", help="Skip loading the demo data.")

    def handle(self, *args, **options):
        host = env_str("MEMWEB_HOST", "127.0.0.1")
        port = env_int("MEMWEB_PORT", 8000, minimum=1, maximum=65535)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("createcachetable", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        self._create_admin_once()
        # Explicit for SIGINT too: a shell starting `make run` in the background ignores SIGINT in
        # it, and Python then raises no KeyboardInterrupt, so Ctrl-C or `kill -INT` would do nothing.
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop_signal, _interrupt)
        children = [Child("worker", self._start_worker), Child("web server", lambda: self._start_web(host, port))]
        supervisor = Supervisor(children, say=self._say)
        supervisor.start()
        self.stdout.write(self.style.SUCCESS(f"\nmemweb is running at http://{host}:{port}/  (Ctrl-C stops everything)\n"))
        try:
            if self._load_demo(skip=options["no_demo"]):
                self._wait()
        finally:
            self._stop(supervisor)
        if supervisor.gave_up:
            sys.exit(1)

    def _load_demo(self, *, skip: bool) -> bool:
        """Load the demo while the dashboard already serves: the first start plays whole
        evaluation runs, which takes minutes. Loading is idempotent and resumes where an
        interrupted start stopped. Returns False when Ctrl-C came during the load."""
        if skip:
            return True
        self.stdout.write("Loading the demo data in the background of the running dashboard…")
        try:
            call_command("load_demo")
        except KeyboardInterrupt:
            self.stdout.write("\nStopping memweb…")
            return False
        self.stdout.write(self.style.SUCCESS("Demo data loaded."))
        return True

    def _create_admin_once(self) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("Admin account exists; log in with the password printed on the first run.")
            return
        password = secrets.token_urlsafe(15)
        users.objects.create_superuser("admin", email="", password=password)
        # Printed to the terminal only: never written to a file or a log.
        self.stdout.write(self.style.WARNING(
            f"\nCreated the admin account.\n  user: admin\n  password: {password}\n"
            "This password is shown once and stored nowhere; keep it now.\n"
        ))

    def _start_worker(self) -> subprocess.Popen:
        concurrency = str(env_int("MEMWEB_WORKER_CONCURRENCY", 2, minimum=1))
        return _spawn([sys.executable, "-m", "celery", "-A", "memweb", "worker",
                       "--loglevel", "INFO", "--concurrency", concurrency])

    def _start_web(self, host: str, port: int) -> subprocess.Popen:
        return _spawn([sys.executable, "-m", "gunicorn", "memweb.wsgi", "--bind", f"{host}:{port}",
                       "--workers", str(WEB_WORKERS), "--threads", "4", "--access-logfile", "-",
                       "--no-control-socket", "--config", "python:memweb.gunicorn_conf"],
                      env={"OMP_NUM_THREADS": str(web_torch_threads())} | os.environ)

    def _say(self, text: str, *, fault: bool = False) -> None:
        self.stdout.write(self.style.ERROR(text) if fault else self.style.WARNING(text))

    def _wait(self) -> None:
        # Until Ctrl-C, SIGTERM or the supervisor giving up (it sends this process SIGTERM).
        try:
            while True:
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping memweb…")

    def _stop(self, supervisor: "Supervisor") -> None:
        # SIGTERM to each main process only: gunicorn and Celery then shut their
        # own workers down gracefully; whatever is left after that is killed.
        processes = supervisor.stop()
        for child in processes:
            if child.poll() is None:
                child.terminate()
        for child in processes:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            _kill_group(child.pid)
        if settings.USES_EMBEDDED_DB:
            from django.db import connections

            connections.close_all()
            try:
                embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))
            except RuntimeError as exc:
                self.stderr.write(f"memweb stopped the web server and the worker, but the database is still up: {exc}")
                return
        self.stdout.write("memweb stopped: web server, worker and database are down.")


class Restarts:
    """When one process was restarted lately: paces the next restart (the first at once, then 1, 2,
    4... s later, at most BACKOFF_MAX_SECONDS) and says when too many came within the window to go on."""

    def __init__(self):
        self._times: deque[float] = deque()

    def _recent(self) -> int:
        cutoff = time.monotonic() - RESTART_WINDOW_SECONDS
        while self._times and self._times[0] < cutoff:
            self._times.popleft()
        return len(self._times)

    def exhausted(self) -> bool:
        return self._recent() >= RESTART_LIMIT

    def delay(self) -> float:
        recent = self._recent()
        return min(BACKOFF_MAX_SECONDS, 2.0 ** (recent - 1)) if recent else 0.0

    def record(self) -> None:
        self._times.append(time.monotonic())


class Child:
    """The web server or the worker: a process serve starts, each leading a process group of its own."""

    def __init__(self, name: str, start):
        self.name, self._start, self.restarts = name, start, Restarts()
        self.process: subprocess.Popen = start()

    def restart(self) -> None:
        # A Celery main process killed by SIGKILL leaves its pool processes behind in its group.
        _kill_group(self.process.pid)
        self.process = self._start()

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass


class Database:
    """The embedded PostgreSQL. pg_ctl detaches it, so it is no child of serve: it is looked at
    (process alive, socket file present) rather than waited for."""

    name = "database"

    def __init__(self):
        self.server, self.restarts = embedded_db.EmbeddedServer(settings.DATA_DIR), Restarts()

    def fault(self) -> str | None:
        return embedded_db.serving_fault(self.server)

    def restart(self) -> int | None:
        embedded_db.ensure_running(settings.DATA_DIR, settings.EMBEDDED_DB_NAME)
        return embedded_db.postmaster_pid(self.server)


class Supervisor:
    """Watches the web server, the worker and the embedded database from a thread of its own (the
    main thread loads the demo and receives Ctrl-C), restarts whichever died and says so, and gives
    up - the main thread then stops everything - when one keeps dying."""

    def __init__(self, children: list[Child], *, say):
        self.children, self.say, self.gave_up = children, say, False
        self.database = Database() if settings.USES_EMBEDDED_DB else None
        self._stopping = threading.Event()
        self._worker_paused = False
        self._thread = threading.Thread(target=self._watch, name="memweb-supervisor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[subprocess.Popen]:
        """Ends the watching (a restart under way finishes first) and hands over the processes to stop."""
        self._stopping.set()
        self._thread.join(timeout=120)
        self._resume_worker()  # a stopped process would not act on the SIGTERM that follows
        return [child.process for child in self.children]

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_SECONDS) and not self.gave_up:
            if self.database is not None:
                self._check_database()
            for child in self.children:
                if not self.gave_up:
                    self._check_child(child)

    def _check_child(self, child: Child) -> None:
        code = child.process.poll()
        if code is None:
            return
        self.say(f"memweb: the {child.name} (PID {child.process.pid}) {_ended(code)}.", fault=True)
        if self._may_restart(child):
            child.restart()
            self.say(f"memweb: restarted the {child.name} (PID {child.process.pid}).")

    def _check_database(self) -> None:
        fault = self.database.fault()
        if fault is None:
            return
        self.say(f"memweb: the database is unreachable: {fault}.", fault=True)
        self._pause_worker()
        if not self._may_restart(self.database):
            return
        try:
            pid = self.database.restart()
        except Exception as exc:  # pg_ctl's failure or a refused connection: the next look tries again
            self.say(f"memweb: restarting the database failed: {exc}", fault=True)
            return
        self.say(f"memweb: restarted the database (PostgreSQL, PID {pid}).")
        self._resume_worker()

    def _may_restart(self, watched: "Child | Database") -> bool:
        if watched.restarts.exhausted():
            self.say(f"memweb: giving up: the {watched.name} was restarted {RESTART_LIMIT} times within "
                     f"{RESTART_WINDOW_SECONDS} s and is down again. Stopping everything.", fault=True)
            self.gave_up = True
            os.kill(os.getpid(), signal.SIGTERM)  # the main thread stops everything, as on Ctrl-C
            return False
        delay = watched.restarts.delay()
        if delay:
            self.say(f"memweb: restarting the {watched.name} in {delay:g} s.")
        if self._stopping.wait(delay):
            return False
        watched.restarts.record()
        return True

    def _pause_worker(self) -> None:
        """Without its database the worker can only fail, restart its consumer and log a traceback
        a second (kilobytes per second); stopped, it picks up where it was once the database is back."""
        worker = self._child("worker")
        if worker is not None and not self._worker_paused:
            worker.signal_group(signal.SIGSTOP)
            self._worker_paused = True
            self.say("memweb: the worker is paused until the database is back.")

    def _resume_worker(self) -> None:
        worker = self._child("worker")
        if worker is not None and self._worker_paused:
            worker.signal_group(signal.SIGCONT)
            self._worker_paused = False

    def _child(self, name: str) -> Child | None:
        return next((child for child in self.children if child.name == name), None)


def _ended(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def web_torch_threads() -> int:
    """Each web worker embeds queries with torch, whose default of one thread per core in every
    worker oversubscribes the cores: on a busy machine a query then took seconds instead of tens
    of milliseconds (docs/PERFORMANCE.md, issue 17). Each worker gets its share, as Celery's do,
    unless OMP_NUM_THREADS is set already."""
    return max(1, (os.cpu_count() or 1) // WEB_WORKERS)


def _spawn(args: list[str], env: dict | None = None) -> subprocess.Popen:
    # Own process group, so Ctrl-C reaches us first and we stop children in order.
    return subprocess.Popen(args, start_new_session=True, env=env)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _interrupt(*_signal_args) -> None:
    """SIGTERM and SIGINT stop memweb the way Ctrl-C does in a terminal."""
    raise KeyboardInterrupt
