"""Logging filters named in settings.LOGGING.

A refused request (403 for a missing role, 404 for another's object) is expected traffic, not a
fault: Django logs it with the exception's whole traceback, and a busy dashboard's log becomes
tracebacks of nothing. Such records keep one line, with the reason the request was refused."""
import logging

from django.core.exceptions import PermissionDenied
from django.http import Http404

EXPECTED_REFUSALS = (PermissionDenied, Http404)


class OneLineRefusals(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, EXPECTED_REFUSALS):
            reason = str(error)
            record.msg = f"{record.msg} ({reason})" if reason else record.msg
            record.exc_info, record.exc_text = None, None
        return True
