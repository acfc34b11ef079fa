"""A worker that dies in the middle of a job, for the tests that a re-delivered job does nothing twice."""
from memweb.jobs import JobContext


class WorkerDied(BaseException):
    """A worker killed mid-job: a BaseException, so that no handler of the job framework catches it."""


def job_worker_dies_at(monkeypatch, done: int) -> None:
    """The next job's worker dies right after reporting `done` steps of progress."""
    real_progress = JobContext.progress

    def dies(context, reached, total=None, message=""):
        real_progress(context, reached, total, message)
        if reached == done:
            raise WorkerDied
    monkeypatch.setattr(JobContext, "progress", dies)
