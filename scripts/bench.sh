#!/usr/bin/env bash
# `make bench`: every benchmark's quick mode and one table of the performance targets (bench/__main__.py),
# written to the top of docs/PERFORMANCE.md. Makes the peers' venv first if missing (.venv-peers: Mem0 and
# Chroma from requirements-bench.txt, a minute or two; memweb's own packages, torch included, are read from
# .venv through a .pth file, so nothing heavy is installed twice). Arguments go to `python -m bench`.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
if ! .venv-peers/bin/python -c "import mem0, chromadb" 2>/dev/null; then
  echo "memweb: making .venv-peers for Mem0 and Chroma"
  python3 -m venv .venv-peers
  # requirements-bench.txt pins everything the peers brought in, overrides included (kubernetes asks a
  # python-dateutil that celery's pin excludes, and no local client imports kubernetes): installed as
  # listed, without a resolver that would refuse that known conflict.
  memweb_site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  peers_site="$(.venv-peers/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$memweb_site" > "$peers_site/zz_memweb_venv.pth"
  .venv-peers/bin/pip install --quiet --disable-pip-version-check --no-deps -r requirements-bench.txt
fi
exec .venv/bin/python -m bench --write docs/PERFORMANCE.md "$@"
