"""Background jobs: long work runs on a Celery worker, never inside a web request.

A request that asks for long work (a bank import or copy, a DMRM source-memory build) checks what
is cheap to check, then `job_start`s a job and answers at once: the page shows the job's progress
card, the API answers 202 with the job's status URL. One Celery task (memweb.tasks.job_run) runs
every job by calling the function its app registered for the job's kind (an AppConfig's
`job_kinds`, memweb.registry): memweb never imports the apps.

A job function is called as `function(context, **payload)`: it reports progress through
`context.progress` in bounded steps and returns the result (a dict; its `url` links to what it
made). It must leave nothing half-written when it fails: its writes run in transactions per step,
or it cleans up. `JobFailed` is a refusal shown as it is; any other exception is shown with its
type, and its traceback goes to the worker's log.

A worker claims a job with a conditional update, in the name of its process (a worker instance and
pid, memweb.services.worker_claimant), so a message delivered twice runs the job once. The worker
beat `jobs_resend_stale` sends again the message of a job nobody claimed for JOB_RESEND_SECONDS
(the broker lost it) and of a job whose worker process died while running it.
"""
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from memweb.models import Job, default_workspace_id
from memweb.registry import job_function
from memweb.roles import Role, has_role
from memweb.scoping import workspace_scope
from memweb.services import claims_stale, worker_liveness_window
from memweb.workspaces import workspace_current

logger = logging.getLogger(__name__)
MESSAGE_CHARS = Job._meta.get_field("message").max_length


class JobFailed(Exception):
    """The job cannot do what it was asked (a name taken meanwhile, lines that no longer check)."""


@dataclass
class JobContext:
    """What a job function gets besides its payload: who asked, the stored upload, and progress."""

    job_id: int
    user: object  # the user who started the job, or None for a script
    upload: str
    workspace: object  # the job's workspace: everything it reads and writes belongs to it

    def progress(self, done: int, total: int | None = None, message: str = "") -> None:
        """Record how far the job got. Called between steps, outside their transactions, so the
        status page sees it at once."""
        fields = {"done": done} | ({"total": total} if total is not None else {})
        if message:
            fields["message"] = message[:MESSAGE_CHARS]
        Job.objects.filter(pk=self.job_id).update(**fields)


def job_start(*, kind: str, title: str, payload: dict, workspace=None, user=None, upload: str = "") -> Job:
    """Create the job in `workspace` (None: the default one, for scripts) and queue it for a worker
    when the current transaction commits."""
    job_function(kind)  # an unregistered kind is refused here, not later on the worker
    job = Job.objects.create(workspace_id=workspace.pk if workspace else default_workspace_id(), kind=kind,
                             title=title[:Job._meta.get_field("title").max_length], payload=payload,
                             upload=upload, created_by=user if getattr(user, "is_authenticated", False) else None,
                             message="Waiting for a worker.")
    _send(job.pk)
    return job


def _dead_claim() -> Q:
    """A running job whose worker process is gone (claims_stale; a job's claim dates from its start)."""
    return Q(status=Job.Status.RUNNING) & claims_stale(field="worker", at="started_at", grace=worker_liveness_window())


def job_execute(*, job_id: int, worker: str = "") -> None:
    """Run the job (the body of the Celery task). A job that finished, or that a live worker
    process is running, is left alone: a redelivered or resent message does nothing. One whose
    worker died starts over, which job functions allow since they leave nothing half-written."""
    claimed = Job.objects.filter(Q(status=Job.Status.QUEUED) | _dead_claim(), pk=job_id).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), worker=worker, error="", message="Started.")
    if not claimed:
        return
    job = Job.objects.select_related("created_by", "workspace").get(pk=job_id)
    context = JobContext(job_id=job.pk, user=job.created_by, upload=job.upload, workspace=job.workspace)
    try:
        with workspace_scope(job.workspace):  # a job reads and writes as its request would have
            result = job_function(job.kind)(context, **job.payload)
    except JobFailed as refused:
        _finish(job_id, worker, status=Job.Status.FAILED, error=str(refused))
    except Exception as exc:
        logger.exception("job #%s (%s) failed", job_id, job.kind)
        _finish(job_id, worker, status=Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
    else:
        _finish(job_id, worker, status=Job.Status.SUCCEEDED, result=result or {})


def _finish(job_id: int, worker: str, *, status: str, error: str = "", result: dict | None = None) -> None:
    """Record the end, unless the job was meanwhile given to another worker (this one was presumed dead)."""
    if not connection.in_atomic_block:  # (a test's transaction) a broken connection is replaced to record it
        close_old_connections()
    message = "Failed." if status == Job.Status.FAILED else "Done."
    Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, worker=worker).update(
        status=status, error=error, result=result or {}, upload="", message=message, finished_at=timezone.now())


def jobs_resend_stale() -> int:
    """Worker beat: queue again each job that waited JOB_RESEND_SECONDS without a worker claiming it
    (its message was lost: a broker restarted without persistence) or whose worker process died while
    running it. A resent message that finds its job claimed meanwhile does nothing."""
    now = timezone.now()
    waited = Q(status=Job.Status.QUEUED, queued_at__lt=now - timedelta(seconds=settings.JOB_RESEND_SECONDS))
    with transaction.atomic():
        # skip_locked: of many workers' beats, one resends each job.
        ids = list(Job.objects.filter(waited | _dead_claim()).select_for_update(skip_locked=True)
                   .values_list("pk", flat=True))
        Job.objects.filter(pk__in=ids).update(status=Job.Status.QUEUED, queued_at=now, worker="",
                                              message="Waiting for a worker (sent again).")
        for job_id in ids:
            _send(job_id)
    return len(ids)


def _send(job_id: int) -> None:
    from memweb.tasks import job_run

    job_run.delay_on_commit(job_id)


def jobs_visible_to(user) -> QuerySet:
    """A user's own jobs in their current workspace; an admin sees everyone's there. The stored
    upload is never loaded for a list."""
    jobs = Job.objects.defer("upload").select_related("created_by").of(workspace_current(user))
    return jobs if has_role(user, Role.ADMIN) else jobs.filter(created_by=user)
