"""The endpoint capability record: advisory, except that a lost database connection is not hidden."""
import pytest
from django.db import OperationalError, ProgrammingError

from memweb.llm import capabilities
from memweb.llm.capabilities import capabilities_note, capabilities_read

URL, MODEL = "http://127.0.0.1:9/v1", "m"


class BrokenCache:
    def __init__(self, error: Exception):
        self.error = error

    def get(self, key):
        raise self.error

    def set(self, key, value, timeout):
        raise self.error


@pytest.mark.django_db
def test_it_merges_facts_into_one_record_per_endpoint():
    capabilities_note(base_url=URL, model=MODEL, streaming=True)
    capabilities_note(base_url=URL, model=MODEL, tools=True)
    assert capabilities_read(base_url=URL, model=MODEL) == {"streaming": True, "tools": True}
    assert capabilities_read(base_url=URL, model="other") == {}


@pytest.mark.django_db
def test_it_carries_on_when_the_cache_table_is_missing(monkeypatch):
    monkeypatch.setattr(capabilities, "cache", BrokenCache(ProgrammingError('relation "memweb_cache" does not exist')))
    capabilities_note(base_url=URL, model=MODEL, streaming=True)
    assert capabilities_read(base_url=URL, model=MODEL) == {}


@pytest.mark.django_db
def test_it_lets_a_lost_database_connection_through(monkeypatch):
    # The episode task must see it and give the episode back (tests/reliability/test_faults.py).
    monkeypatch.setattr(capabilities, "cache", BrokenCache(OperationalError("terminating connection")))
    with pytest.raises(OperationalError):
        capabilities_read(base_url=URL, model=MODEL)
