"""Download names: whatever a task set or bank is called, the Content-Disposition header carries one
file name and nothing else, and every download goes through the one helper."""
import pytest
from django.http import HttpResponse

from memweb.downloads import NAME_CHARS, attachment, attachment_name
from tests.support.processes import ROOT


@pytest.mark.parametrize(("name", "header"), [
    ("shop-130.jsonl", 'attachment; filename="shop-130.jsonl"'),
    ('evil"; filename="x.html.jsonl', 'attachment; filename="evil-filename-x.html.jsonl"'),
    ("a;b=c\\..\\..\\etc/passwd", 'attachment; filename="a-b-c-etc-passwd"'),
    ("../.hidden.jsonl", 'attachment; filename="hidden.jsonl"'),
    ("Kühlschrank Äpfel.jsonl", "attachment; filename*=utf-8''K%C3%BChlschrank-%C3%84pfel.jsonl"),
    ('";', 'attachment; filename="download"'),
])
def test_it_offers_one_clean_file_name(name, header):
    assert attachment(HttpResponse("x"), filename=name)["Content-Disposition"] == header


def test_it_keeps_a_long_names_end():
    kept = attachment_name("x" * 500 + ".jsonl")
    assert len(kept) == NAME_CHARS and kept.endswith(".jsonl")


def test_every_download_names_its_file_through_the_helper():
    sources = [path for folder in ("memweb", "orbs", "evaluation", "annotation") for path in (ROOT / folder).rglob("*.py")]
    setting = [str(path.relative_to(ROOT)) for path in sources
               if "Content-Disposition" in path.read_text() and path.name != "downloads.py"]
    assert setting == []
