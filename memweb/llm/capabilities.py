"""What each endpoint (base URL + model) was seen to support, for the client and the health page.

Kept in Django's cache with no expiry, so every web and worker process shares one record and a
probe runs once per endpoint. The record is advisory: when the cache fails (a database cache
table missing, say) the call goes on and the next one probes again. A lost database connection
is not swallowed: it must reach the task, which gives the episode back to be played again.
"""
import hashlib
import logging

from django.core.cache import cache
from django.db import InterfaceError, OperationalError, transaction

logger = logging.getLogger(__name__)
KEY_PREFIX = "memweb:llm:endpoint:"


def _key(base_url: str, model: str) -> str:
    return KEY_PREFIX + hashlib.sha256(f"{base_url}\n{model}".encode()).hexdigest()


def capabilities_read(*, base_url: str, model: str) -> dict:
    try:
        # A savepoint: a failing cache query must not break a transaction the caller holds.
        with transaction.atomic():
            return cache.get(_key(base_url, model)) or {}
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # advisory data; see the module docstring
        logger.warning("LLM capability record unreadable: %s", exc)
        return {}


def capabilities_note(*, base_url: str, model: str, **facts) -> None:
    """Merge `facts` into the endpoint's record; a no-op when nothing changed."""
    record = capabilities_read(base_url=base_url, model=model)
    if all(record.get(name) == value for name, value in facts.items()):
        return
    try:
        with transaction.atomic():
            cache.set(_key(base_url, model), {**record, **facts}, timeout=None)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # advisory data; see the module docstring
        logger.warning("LLM capability record not written: %s", exc)
