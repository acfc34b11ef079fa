#!/usr/bin/env bash
# Creates .venv and installs pinned Python and front-end dependencies.
# Re-running is cheap: each install is skipped while its lock file is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "memweb: creating the virtual environment in .venv"
  "$PYTHON" -m venv .venv
fi

stamp_matches() { [ -f "$2" ] && [ "$(cat "$2")" = "$(sha256sum "$1" | cut -d' ' -f1)" ]; }
stamp_write() { sha256sum "$1" | cut -d' ' -f1 > "$2"; }

if ! stamp_matches requirements.txt .venv/.requirements.sha256; then
  echo "memweb: installing Python requirements (first run takes a few minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  # torch first and pinned: a FlagEmbedding install that finds no torch pulls the CUDA build.
  .venv/bin/python -m pip install --quiet "$(grep '^torch==' requirements.txt)"
  .venv/bin/python -m pip install --quiet -r requirements.txt
  stamp_write requirements.txt .venv/.requirements.sha256
fi

if ! stamp_matches package-lock.json node_modules/.lock.sha256; then
  echo "memweb: installing front-end files from package-lock.json"
  npm ci --no-audit --no-fund --loglevel=error
  stamp_write package-lock.json node_modules/.lock.sha256
fi
