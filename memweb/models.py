"""Shared infrastructure records: LLM call log, agent API keys, worker heartbeats."""
import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


class LLMCall(models.Model):
    """One request to an LLM endpoint; summed by pages into tokens and cost."""

    class Status(models.TextChoices):
        OK = "ok", "ok"
        REPAIRED = "repaired", "ok after JSON repair"
        ERROR = "error", "error"

    role = models.CharField(max_length=32, db_index=True)
    model = models.CharField(max_length=200)
    base_url = models.CharField(max_length=500)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.role} {self.model} {self.status}"


class ApiKey(models.Model):
    """An agent's key for the JSON API. Only a SHA-256 of the secret is stored:
    keys are 256-bit random tokens, so a slow hash adds nothing but latency."""

    PREFIX_LENGTH = 8

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @classmethod
    def issue(cls, *, user, name: str) -> tuple["ApiKey", str]:
        """Create a key and return it with its secret, which is never stored."""
        secret = "mw_" + secrets.token_urlsafe(32)
        key = cls.objects.create(
            user=user, name=name, prefix=secret[: cls.PREFIX_LENGTH], key_hash=cls.hash_secret(secret)
        )
        return key, secret

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


class WorkerHeartbeat(models.Model):
    """Written by each Celery worker every few seconds; works on any broker,
    including ones without broadcast (where `inspect().ping()` cannot)."""

    hostname = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.hostname


class TaskProbe(models.Model):
    """A round trip through broker and worker, queued from the health page
    (and the Celery tests) to prove queued work really gets done."""

    token = models.CharField(max_length=64, unique=True)
    queued_at = models.DateTimeField(default=timezone.now)
    done_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True)

    def __str__(self) -> str:
        return self.token


class IdempotentRequest(models.Model):
    """A write to the API sent with an `Idempotency-Key` header, and the answer it got: a retry with
    the same key is answered from here instead of running the write again (memweb.idempotency)."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress", "in progress"
        DONE = "done", "done"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="idempotent_requests")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=10)
    path = models.TextField(help_text="With its query string: ?sync=true asks for another write.")
    body_hash = models.CharField(max_length=64, help_text="SHA-256 of the request body.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.IN_PROGRESS)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=200, blank=True)
    body = models.TextField(blank=True)
    location = models.TextField(blank=True, help_text="The Location header of the answer, replayed with it.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotent_request_unique_key")]

    def __str__(self) -> str:
        return f"{self.key} {self.method} {self.path} ({self.state})"
