.PHONY: run test

# Command 1: set everything up and start the dashboard (web + Celery worker + embedded PostgreSQL).
run:
	scripts/bootstrap.sh
	.venv/bin/python manage.py serve

# Command 2: install what the suite needs and run every test.
test:
	scripts/test.sh
