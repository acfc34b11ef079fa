"""Command 1's second half: prepare the database and run web + worker until Ctrl-C."""
import os
import secrets
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import BaseCommand, call_command

from memweb.env import env_int, env_str

WEB_WORKERS = 2  # gunicorn worker processes, each with 4 threads


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
        children = [self._start_worker(), self._start_web(host, port)]
        self.stdout.write(self.style.SUCCESS(f"\nmemweb is running at http://{host}:{port}/  (Ctrl-C stops everything)\n"))
        try:
            if self._load_demo(skip=options["no_demo"]):
                self._wait(children)
        finally:
            self._stop(children)

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

    def _wait(self, children: list[subprocess.Popen]) -> None:
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
            self.stderr.write("A memweb process exited on its own; stopping the others.")
        except KeyboardInterrupt:
            self.stdout.write("\nStopping memweb…")

    def _stop(self, children: list[subprocess.Popen]) -> None:
        # SIGTERM to each main process only: gunicorn and Celery then shut their
        # own workers down gracefully; whatever is left after that is killed.
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            _kill_group(child.pid)
        if settings.USES_EMBEDDED_DB:
            from django.db import connections

            from memweb import embedded_db

            connections.close_all()
            embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))
        self.stdout.write("memweb stopped: web server, worker and database are down.")


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
