"""Background jobs in the JSON API: `GET /api/jobs/{id}` is a job's status URL, and the routes of
the apps that start long work answer 202 with `job_accepted` (the job, its absolute status URL,
and that URL in the Location header)."""

from django.urls import reverse
from ninja import Router
from ninja.errors import HttpError
from ninja.responses import Status

from memweb.jobs import jobs_visible_to
from memweb.models import Job
from memweb.schemas import JobOut

router = Router(tags=["jobs"])




def job_out(request, job: Job) -> dict:
    result_path = job.result.get("url") if job.status == Job.Status.SUCCEEDED else None
    fields = ("id", "kind", "title", "status", "done", "total", "progress_percent", "message", "error", "result",
              "created_at", "started_at", "finished_at")
    return {**{name: getattr(job, name) for name in fields},
            "result_url": request.build_absolute_uri(result_path) if result_path else None,
            "status_url": request.build_absolute_uri(reverse("api:job_status", kwargs={"job_id": job.pk})),
            "url": request.build_absolute_uri(reverse("job_detail", args=[job.pk]))}


def job_accepted(request, response, job: Job) -> Status:
    """202 Accepted for a route that started `job`, with its status URL in the Location header."""
    answer = job_out(request, job)
    response["Location"] = answer["status_url"]
    return Status(202, answer)


@router.get("/{job_id}", response=JobOut, url_name="job_status")
def job_status(request, job_id: int):
    """A background job of this key's user: its progress, then its result or its error."""
    job = jobs_visible_to(request.auth).filter(pk=job_id).first()
    if job is None:
        raise HttpError(404, f"No job #{job_id} of yours")
    return job_out(request, job)
