"""Fixtures of the runs tests: a small run spec, launching, and a real broker for worker tests."""
import pytest
from kombu import Connection, pools
from sqlalchemy.pool import NullPool

from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_launch
from evaluation.runs.services.launch import run_preparation_job
from memweb.celery import app as celery_app
from memweb.jobs import job_execute
from tests.support.processes import database_url_for_tests

# Three tasks whose error kinds the scripted agent can make (and memory can fix).
TASK_IDS = ["shop-app-001", "shop-app-023", "shop-clo-008"]
RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}


def spec(**overrides) -> dict:
    """A small MemOrb run: 3 tasks x 3 trials, retrieval once per episode."""
    return {"name": "small run", "task_ids": TASK_IDS, "trials": 3, "memory_mode": "memorb", "per_turn": False,
            "agent": {"error_rates": RATES}, **overrides}


def prepared(run: EvaluationRun) -> EvaluationRun:
    """A run that starts from a copy of a bank, once its preparation job has copied it (in a `db` test
    the job's message never leaves: it runs here), queued; any other run as it is."""
    if run.status == EvaluationRun.Status.PREPARING:
        job_execute(job_id=run_preparation_job(run=run).pk)
        run.refresh_from_db()
    return run


@pytest.fixture
def launch(builtin, operator_user):
    """Launch a run (queued; in a `db` test its start message never leaves: drive it with run_drive)."""
    def make(**overrides):
        return prepared(run_launch(spec=spec(**overrides), user=operator_user))
    return make


def sqla_broker_url() -> str:
    return "sqla+" + database_url_for_tests().replace("postgresql://", "postgresql+psycopg://", 1)


def broker_producers_reset() -> None:
    """Close every pooled broker connection (kombu keeps them process-wide) so the next message
    goes through a connection to the current broker URL and none outlives the test database."""
    pools.reset()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def real_broker():
    """This process publishes to the broker a test worker consumes (kombu's SQLAlchemy transport on
    the test database), instead of running tasks eagerly; the queue starts empty."""
    url, saved = sqla_broker_url(), (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    with Connection(url, transport_options={"poolclass": NullPool}) as connection:
        connection.default_channel.queue_purge("celery")
    celery_app.conf.update(task_always_eager=False, broker_url=url, broker_transport_options={"poolclass": NullPool})
    broker_producers_reset()
    yield url
    broker_producers_reset()
    celery_app.conf.update(broker_url=saved[0], broker_transport_options=saved[1])
