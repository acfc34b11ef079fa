"""`manage.py load_demo` records how far it is while each app's demo loads, and leaves nothing behind
when it ends, interrupted or not (the next start resumes the load)."""
from types import SimpleNamespace

import pytest
from django.core.management import call_command

from memweb.demo_loading import demo_loading_now
from memweb.management.commands import load_demo as command


@pytest.mark.django_db
def test_it_records_each_part_and_clears_the_record_even_when_interrupted(monkeypatch):
    seen = []

    def record(stdout):
        now = demo_loading_now()
        seen.append((now.parts_done, now.parts_total, now.part))

    def interrupted(stdout):
        record(stdout)
        raise KeyboardInterrupt

    demos = {"first.demo": record, "second.demo": interrupted}
    monkeypatch.setattr(command, "_demo_loaders", lambda: [("First", "first.demo"), ("Second", "second.demo")])
    monkeypatch.setattr(command, "import_module", lambda name: SimpleNamespace(load_demo=demos[name]))
    with pytest.raises(KeyboardInterrupt):
        call_command("load_demo")
    assert seen == [(0, 2, "First"), (1, 2, "Second")]
    assert demo_loading_now() is None
