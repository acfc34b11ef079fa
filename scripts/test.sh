#!/usr/bin/env bash
# Installs what the suite needs (Python and front-end dependencies, Debian's
# chromium for the browser tests), lints with ruff and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
if ! command -v chromium >/dev/null 2>&1; then
  echo "memweb: installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "memweb: ruff check"
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
