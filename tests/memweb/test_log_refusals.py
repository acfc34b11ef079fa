"""A refused request is logged as one line naming why, never with a traceback (issue 20)."""
import logging

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_a_page_refused_for_a_missing_role_is_one_log_line_with_the_reason(client, annotator_user, caplog):
    client.force_login(annotator_user)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(reverse("api_keys"))
    assert response.status_code == 403
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.exc_info is None and record.exc_text is None
    line = logging.Formatter().format(record)
    assert "\n" not in line
    assert "Forbidden" in line and "needs one of the roles" in line


def test_a_fault_keeps_its_traceback(caplog):
    logger = logging.getLogger("django.request")
    with caplog.at_level(logging.ERROR, logger="django.request"):
        try:
            raise RuntimeError("a real fault")
        except RuntimeError:
            logger.error("Internal Server Error: /x", exc_info=True)
    (record,) = caplog.records
    assert "Traceback" in logging.Formatter().format(record)
