"""The embedded PostgreSQL: first start, reuse, and recovery after SIGKILL.

Each test uses its own data folder, so it exercises a real initdb and never
disturbs the server the rest of the suite runs on."""
import os
import signal

import psycopg
import pytest

from memweb import embedded_db
from tests.support.processes import wait_until


@pytest.fixture
def fresh_server(tmp_path):
    data_dir = tmp_path / "data"
    yield data_dir
    embedded_db.stop(embedded_db.EmbeddedServer(data_dir))


def _query(server, sql):
    with psycopg.connect(server.url("memweb")) as conn:
        return conn.execute(sql).fetchone()[0]


def test_it_initialises_starts_and_offers_pgvector(fresh_server):
    server, started = embedded_db.ensure_running(fresh_server, "memweb")
    assert started
    assert (server.pgdata / "PG_VERSION").exists()
    assert _query(server, "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")


def test_it_reuses_a_running_server(fresh_server):
    server, _ = embedded_db.ensure_running(fresh_server, "memweb")
    pid = embedded_db.postmaster_pid(server)
    again, started = embedded_db.ensure_running(fresh_server, "memweb")
    assert not started
    assert embedded_db.postmaster_pid(again) == pid


def test_it_recovers_after_the_server_was_killed(fresh_server):
    server, _ = embedded_db.ensure_running(fresh_server, "memweb")
    with psycopg.connect(server.url("memweb"), autocommit=True) as conn:
        conn.execute("CREATE TABLE survivor (note text)")
        conn.execute("INSERT INTO survivor VALUES ('kept')")
    os.kill(embedded_db.postmaster_pid(server), signal.SIGKILL)

    recovered, started = embedded_db.ensure_running(fresh_server, "memweb")

    assert started
    assert _query(recovered, "SELECT note FROM survivor") == "kept"


def test_it_ignores_a_stale_pid_file_naming_another_process(fresh_server):
    server, _ = embedded_db.ensure_running(fresh_server, "memweb")
    embedded_db.stop(server)
    # A postmaster.pid whose PID now belongs to an unrelated process (this test).
    (server.pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n{server.pgdata}\n")

    _, started = embedded_db.ensure_running(fresh_server, "memweb")

    assert started
    assert embedded_db.is_running(server)


def test_it_stops_cleanly(fresh_server):
    server, _ = embedded_db.ensure_running(fresh_server, "memweb")
    embedded_db.stop(server)
    assert not embedded_db.is_running(server)


def test_it_starts_afresh_a_server_whose_socket_file_was_removed(fresh_server):
    # What the soak met: a running postmaster whose socket file (and its lock) something removed.
    # PostgreSQL never recreates it, so no new connection could reach the server again.
    server, _ = embedded_db.ensure_running(fresh_server, "memweb")
    server.socket_file.unlink()
    server.socket_file.with_name(server.socket_file.name + ".lock").unlink()
    assert "socket file" in embedded_db.serving_fault(server)

    _, started = embedded_db.ensure_running(fresh_server, "memweb")

    assert started
    assert embedded_db.serving_fault(server) is None
    assert _query(server, "SELECT 1") == 1


def test_it_names_a_dead_server_as_the_fault(fresh_server):
    server, _ = embedded_db.ensure_running(fresh_server, "memweb")
    pid = embedded_db.postmaster_pid(server)
    os.kill(pid, signal.SIGKILL)

    fault = wait_until(lambda: embedded_db.serving_fault(server), timeout=60, message="the kill to be seen")
    assert fault == f"PostgreSQL (PID {pid}) is no longer running"
