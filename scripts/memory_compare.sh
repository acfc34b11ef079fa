#!/usr/bin/env bash
# Opt-in (`make memory-compare`): memory layers side by side, Mem0 included (issue 29). Makes Mem0's
# own venv if missing (.venv-mem0: mem0ai from PyPI, about a minute; torch and sentence-transformers
# are read from memweb's .venv through a .pth file, so nothing heavy is installed twice), then runs
# bench/memory_layers_compare.py in a scratch data folder and writes its table into docs/PERFORMANCE.md.
# Arguments go to the script (--tasks, --trials, --seed).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
if ! .venv-mem0/bin/python -c "import mem0" 2>/dev/null; then
  echo "memweb: making .venv-mem0 for Mem0"
  python3 -m venv .venv-mem0
  .venv-mem0/bin/pip install --quiet "$(grep '^mem0ai==' requirements-bench.txt)" "$(grep '^protobuf==' requirements-bench.txt)"
  # Mem0's own packages come first; what it lacks (the embedder's torch stack) from memweb's venv.
  memweb_site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mem0_site="$(.venv-mem0/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$memweb_site" > "$mem0_site/zz_memweb_venv.pth"
fi
export MEMWEB_DATA_DIR="${MEMWEB_DATA_DIR:-$(mktemp -d /tmp/mw-memory-compare.XXXXXX)}"
exec .venv/bin/python -m bench.memory_layers_compare --mem0-python .venv-mem0/bin/python \
  --write docs/PERFORMANCE.md "$@"
