"""A stop that fails is said, not hidden: `serve` used to report the database down when pg_ctl could
not reach it (a folder its system user may not enter)."""
import subprocess

import pytest

from memweb import embedded_db


def test_a_stop_that_leaves_the_server_running_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_db, "is_running", lambda server: True)
    refused = subprocess.CompletedProcess([], 1, stdout="", stderr="pg_ctl: could not open PID file: Permission denied")
    monkeypatch.setattr(embedded_db, "_run_as_owner", lambda args, **kwargs: refused)
    with pytest.raises(RuntimeError, match="(?s)could not stop the embedded PostgreSQL .*Permission denied"):
        embedded_db.stop(embedded_db.EmbeddedServer(tmp_path))


def test_a_stop_that_ends_the_server_is_quiet(tmp_path, monkeypatch):
    states = iter([True, False])
    monkeypatch.setattr(embedded_db, "is_running", lambda server: next(states))
    monkeypatch.setattr(embedded_db, "_run_as_owner", lambda args, **kwargs: subprocess.CompletedProcess([], 1))
    embedded_db.stop(embedded_db.EmbeddedServer(tmp_path))  # pg_ctl's code aside, the server is gone
