#!/usr/bin/env bash
# Installs what the suite needs (Python and front-end dependencies, Debian's
# chromium for the browser tests), lints with ruff and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh --test
if ! command -v chromium >/dev/null 2>&1; then
  echo "memweb: installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "memweb: ruff check"
.venv/bin/ruff check .
# Three processes (pytest-xdist), each with its own test database: the suite is mostly waiting on
# browsers, workers and the database, so even two cores take a third. Work stealing: the few
# minute-long tests (real workers and `serve` killed and restarted) would otherwise leave one
# process working alone at the end. A process's queue is stolen from its end, so tests/conftest.py
# puts the `serve` tests (minutes, no test database) at the start of the first process's queue.
# The slowest tests are listed at the end: the suite is kept under 15 minutes on a quiet machine.
exec .venv/bin/python -m pytest --numprocesses "${MEMWEB_TEST_PROCESSES:-3}" --dist worksteal --durations=30 "$@"
