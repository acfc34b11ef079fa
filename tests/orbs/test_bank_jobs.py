"""Importing and copying a bank are background jobs: the request checks what is cheap (every line of
the file, the name), stores what the job needs and answers with the job; a worker writes the bank
in one transaction, so a job that fails leaves nothing behind."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memweb.models import ApiKey, Job
from orbs.models import MemoryBank, Orb, ReviewEvent
from orbs.services import bank_export, bank_get_or_create
from tests.orbs.conftest import post

API = "/api/orbs"


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def _exported(bank) -> bytes:
    return "".join(bank_export(bank=bank)).encode()


def test_an_imported_file_is_stored_with_its_job_and_written_by_it(operator, bank, make_orb,
                                                                   django_capture_on_commit_callbacks):
    make_orb("The blender is too loud.")
    make_orb("My sweater shrank.", approve=False)
    upload = SimpleUploadedFile("bank.jsonl", _exported(bank))
    with django_capture_on_commit_callbacks() as queued:
        response = operator.post(reverse("orbs:bank_import"), {"file": upload, "name": "Imported"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("job_detail", args=[job.pk])
    assert not MemoryBank.objects.filter(name="Imported").exists()  # nothing written in the request
    assert job.upload.splitlines()[0].startswith('{"type": "bank"')  # the file waits in the job
    queued[0]()
    job.refresh_from_db()
    imported = MemoryBank.objects.get(name="Imported")
    assert (job.status, job.result["bank"], job.result["orbs"], job.upload) == ("succeeded", imported.slug, 2, "")
    assert job.done == job.total == len(_exported(bank).splitlines()) + 1  # every line checked, then one write
    assert imported.orbs.count() == 2
    card = operator.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert reverse("orbs:bank_detail", args=[imported.slug]) in card and "Open bank “Imported”" in card


def test_an_import_whose_name_was_taken_meanwhile_fails_and_writes_nothing(operator, bank, make_orb,
                                                                          django_capture_on_commit_callbacks):
    make_orb("The blender is too loud.")
    with django_capture_on_commit_callbacks() as queued:
        operator.post(reverse("orbs:bank_import"), {"file": SimpleUploadedFile("b.jsonl", _exported(bank)),
                                                    "name": "Taken"})
    taken = bank_get_or_create(name="Taken")
    make_orb("Someone filled it first.", target=taken)
    counts = (Orb.objects.count(), ReviewEvent.objects.count(), MemoryBank.objects.count())
    queued[0]()
    job = Job.objects.get()
    assert job.status == "failed" and job.error == (
        "Nothing was imported: failed at line 1, name: bank 'Taken' already holds Orbs; import under another name")
    assert (Orb.objects.count(), ReviewEvent.objects.count(), MemoryBank.objects.count()) == counts


def test_a_bank_is_copied_by_a_job_from_its_page(operator, bank, make_orb, django_capture_on_commit_callbacks):
    make_orb("The blender is too loud.")
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(reverse("orbs:bank_copy", args=[bank.slug]), {"name": "Shop copy"})
    job = Job.objects.get()
    assert response["Location"] == reverse("job_detail", args=[job.pk])
    job.refresh_from_db()
    copy = MemoryBank.objects.get(name="Shop copy")
    assert (job.status, job.result["bank"], copy.orbs.count()) == ("succeeded", copy.slug, 1)
    refused = operator.post(reverse("orbs:bank_copy", args=[bank.slug]), {"name": "Shop copy"})
    assert refused.status_code == 422 and "a bank called &#x27;Shop copy&#x27; already exists" in refused.content.decode()
    assert Job.objects.count() == 1


def test_the_copy_route_answers_202_with_a_status_url(client, operator_user, bank, make_orb,
                                                      django_capture_on_commit_callbacks):
    make_orb("The blender is too loud.")
    _, secret = ApiKey.issue(user=operator_user, name="agent")
    headers = {"Authorization": f"Bearer {secret}"}
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, f"{API}/banks/{bank.slug}/copy", {"name": "API copy"}, headers=headers)
    assert response.status_code == 202 and response["Location"] == response.json()["status_url"]
    job = client.get(response["Location"], headers=headers).json()
    assert (job["status"], job["result"]["bank"]) == ("succeeded", "api-copy")
    assert job["result_url"] == "http://testserver/orbs/banks/api-copy/"
    taken = post(client, f"{API}/banks/{bank.slug}/copy", {"name": "API copy"}, headers=headers)
    assert taken.status_code == 422 and taken.json() == {"detail": [{"loc": ["body", "payload", "name"],
                                                                 "msg": "name: a bank called 'API copy' already exists"}]}
    assert post(client, f"{API}/banks/nope/copy", {"name": "x"}, headers=headers).status_code == 404
