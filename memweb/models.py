"""Shared infrastructure records: workspaces and their members, LLM call log, agent API keys,
webhooks, worker heartbeats."""
import hashlib
import secrets
import uuid

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

from memweb.roles import Role
from memweb.scoping import AllWorkspacesManager, WorkspaceManager

DEFAULT_WORKSPACE_SLUG = "default"


class Workspace(models.Model):
    """A team or project: it owns banks, task sets, runs, campaigns, jobs, webhooks and API keys,
    and nobody outside it sees them (memweb.workspaces)."""

    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    # An archived workspace is read-only: its pages stay readable, every write is refused
    # (memweb.workspaces), and it leaves the switcher and the landing choice.
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_default(self) -> bool:
        return self.slug == DEFAULT_WORKSPACE_SLUG

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


def default_workspace_id() -> int:
    """The workspace that rows made outside a request (demo data, management commands) belong to;
    the migration that introduced workspaces put every existing row there. It runs inside that and
    later migrations too (a field default), when the table may still lack the columns added since: so
    it reads only the id, and writes only the columns the first workspace table had."""
    found = Workspace.objects.filter(slug=DEFAULT_WORKSPACE_SLUG).values_list("pk", flat=True).first()
    if found is None:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {Workspace._meta.db_table} (slug, name, created_at) VALUES (%s, %s, %s) "
                           "ON CONFLICT DO NOTHING", [DEFAULT_WORKSPACE_SLUG, "Default", timezone.now()])
        found = Workspace.objects.filter(slug=DEFAULT_WORKSPACE_SLUG).values_list("pk", flat=True).get()
    return found


class Membership(models.Model):
    """One role of one user in one workspace: a user may hold several roles in several workspaces."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace__name", "user__username", "role"]
        constraints = [models.UniqueConstraint(fields=["workspace", "user", "role"], name="membership_unique_role")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} in {self.workspace}"


def memberships_grant(*, user, roles, workspace_id: int | None = None) -> None:
    """Give `user` these roles in the workspace (None: the default one); roles held already stay."""
    workspace_id = workspace_id or default_workspace_id()
    Membership.objects.bulk_create([Membership(workspace_id=workspace_id, user=user, role=role) for role in roles],
                                   ignore_conflicts=True)


class WorkspaceLanding(models.Model):
    """The workspace a user last chose to work in: where their next session starts, and where a key
    issued without a workspace acts. Creating a workspace or joining one never changes it."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_landing")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    chosen_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user} → {self.workspace}"


def workspace_landing_remember(*, user, workspace: Workspace) -> None:
    WorkspaceLanding.objects.update_or_create(user=user, defaults={"workspace": workspace, "chosen_at": timezone.now()})


def _may_act_in(user, workspace_id: int) -> bool:
    return user.is_superuser or Membership.objects.filter(user=user, workspace_id=workspace_id).exists()


def _is_open(workspace_id: int) -> bool:
    return Workspace.objects.filter(pk=workspace_id, archived_at__isnull=True).exists()


def landing_workspace_id(user) -> int:
    """Where a user acts until they pick a workspace: the one they last picked, while they may still act
    there and it is not archived; else the default workspace, if they may; else their oldest membership's
    open workspace; else the default (which is never archived)."""
    last = WorkspaceLanding.objects.filter(user=user).values_list("workspace_id", flat=True).first()
    if last is not None and _may_act_in(user, last) and _is_open(last):
        return last
    default = default_workspace_id()
    if _may_act_in(user, default):
        return default
    first = (Membership.objects.filter(user=user, workspace__archived_at__isnull=True).order_by("workspace_id")
             .values_list("workspace_id", flat=True).first())
    return first or default


def workspace_field(related_name: str):
    """The owner of a top-level object; its children are scoped through it (WORKSPACE_PATH)."""
    return models.ForeignKey(Workspace, on_delete=models.PROTECT, default=default_workspace_id,
                             related_name=related_name)


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
    # The episode (and its turn) the call was made for; see memweb.llm.trace.
    trace_id = models.UUIDField(null=True, blank=True, db_index=True)
    turn = models.PositiveSmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.role} {self.model} {self.status}"


class AppendOnly(models.Model):
    """An audit row: written once, never changed or deleted (a trail that can be edited proves nothing).
    Erasure deletes rows through querysets, which this does not stop."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError(f"{self._refused()} are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError(f"{self._refused()} are append-only")

    def _refused(self) -> str:
        return str(self._meta.verbose_name_plural).capitalize()


class ApiKey(models.Model):
    """An agent's key for the JSON API, for one workspace and a set of scopes. Only a SHA-256 of the
    secret is stored: keys are 256-bit random tokens, so a slow hash adds nothing but latency."""

    PREFIX_LENGTH = 8

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    workspace = workspace_field("api_keys")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()
    scopes = models.JSONField(default=list, help_text="The Scope values this key may use.")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_on = models.DateField(null=True, blank=True, help_text="The last day the key works; empty: no expiry.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @classmethod
    def issue(cls, *, user, name: str, workspace: Workspace | None = None,
              scopes: list[str] | tuple[str, ...] | None = None, expires_on=None) -> tuple["ApiKey", str]:
        """Create a key and return it with its secret, which is never stored. Without a workspace,
        the key acts where the user lands (landing_workspace_id); without scopes, it holds every scope the apps declare
        (memweb.registry.api_scopes). A scope no app declares is a ValueError."""
        from memweb.registry import api_scopes  # the apps' scopes, read once they are loaded

        declared = [scope.value for scope in api_scopes()]
        scopes = declared if scopes is None else scopes
        if unknown := sorted(set(scopes) - set(declared)):
            raise ValueError(f"unknown API scope {unknown[0]!r}; known: {', '.join(declared)}")
        secret = "mw_" + secrets.token_urlsafe(32)
        workspace_id = workspace.pk if workspace else landing_workspace_id(user)
        key = cls.objects.create(
            user=user, name=name, prefix=secret[: cls.PREFIX_LENGTH], key_hash=cls.hash_secret(secret),
            workspace_id=workspace_id, scopes=sorted(set(scopes)), expires_on=expires_on,
        )
        return key, secret

    @property
    def has_expired(self) -> bool:
        return self.expires_on is not None and self.expires_on < timezone.localdate()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.has_expired

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


class AuthFailure(models.Model):
    """Failed sign-ins or API-key attempts counted for one client address, one account or one presented
    key prefix in a fixed window (memweb.auth). One row per counter, changed only by single atomic statements, so parallel
    attempts cannot race past the limit."""

    class Kind(models.TextChoices):
        ADDRESS = "address", "client address"
        ACCOUNT = "account", "account"
        KEY_PREFIX = "prefix", "API key prefix"

    scope = models.CharField(max_length=16, help_text="login or api")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # Keyed hash of the address, the username or the key prefix: a password typed into the username field is never kept.
    subject = models.CharField(max_length=64)
    count = models.PositiveIntegerField(default=0)
    window_started_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "kind", "subject"], name="auth_failure_unique_counter")]

    def __str__(self) -> str:
        return f"{self.scope} {self.kind} {self.subject[:8]}…: {self.count}"


class Webhook(models.Model):
    """A URL memweb POSTs events to, each body signed with the webhook's secret (memweb.webhooks).
    The secret is kept as it is: signing needs it (unlike an API key, which is only compared)."""

    # The events are the apps' (memweb.registry.webhook_events); subscriptions store their values.
    # Sent only by "send test event", to the one webhook asked for; nobody subscribes to it.
    TEST_EVENT = "webhook.test"

    workspace = workspace_field("webhooks")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()
    url = models.CharField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    secret = models.CharField(max_length=100)
    events = models.JSONField(default=list, help_text="The Event values this webhook receives.")
    bank = models.CharField(max_length=100, blank=True,
                            help_text="A memory bank's slug: only events of that bank. Empty: every event.")
    active = models.BooleanField(default=True)
    paused_at = models.DateTimeField(null=True, blank=True,
                                     help_text="When it was paused: its events since then wait for the resume.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="webhooks")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event on its way to one webhook: every attempt is logged, retries wait longer each time."""

    WORKSPACE_PATH = "webhook__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        PENDING = "pending", "waiting to be sent"
        SENDING = "sending", "sending"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed (gave up)"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, help_text="Sent as X-Memweb-Delivery.")
    event = models.CharField(max_length=40, db_index=True)
    payload = models.JSONField(help_text="The body sent, before serialisation.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    attempt_log = models.JSONField(default=list, help_text="[{at, status_code, error}] per attempt, oldest first.")
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When the sending attempt began.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    erased_at = models.DateTimeField(null=True, blank=True,
                                     help_text="When a customer erasure scrubbed its payload: never sent again.")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="webhook_delivery_due")]

    def __str__(self) -> str:
        return f"{self.event} → {self.webhook_id} ({self.status})"


class WorkerHeartbeat(models.Model):
    """Written by each Celery worker instance (one start of a worker) every few seconds; works on
    any broker, including ones without broadcast (where `inspect().ping()` cannot). Work is claimed
    in the name of an instance's process, never of a hostname: a worker restarted under the same
    name is a new instance, and the claims of the one that died are not taken for its own."""

    instance = models.CharField(max_length=32, unique=True, help_text="A random id chosen when the worker started.")
    hostname = models.CharField(max_length=255, db_index=True)
    pid = models.PositiveIntegerField()
    processes = models.JSONField(default=list, blank=True,
                                 help_text="PIDs of the pool processes that run its tasks, as of its last beat.")
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.hostname} ({self.instance})"


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
    """The answer a write to the API sent with an `Idempotency-Key` header got, written in the
    transaction of the write itself: a retry with the same key is answered from here instead of
    running the write again (memweb.idempotency). A request still running has no row yet: it holds
    the key with a lock of its transaction."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="idempotent_requests")
    caller = models.CharField(max_length=40, help_text="The credential that sent it: 'key:<API key id>', or "
                                                       "'session:<workspace id>'; only it gets the replay.")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=10)
    path = models.TextField(help_text="With its query string: ?sync=true asks for another write.")
    body_hash = models.CharField(max_length=64, help_text="SHA-256 of the request body.")
    status_code = models.PositiveSmallIntegerField()
    content_type = models.CharField(max_length=200, blank=True)
    body = models.TextField(blank=True)
    location = models.TextField(blank=True, help_text="The Location header of the answer, replayed with it.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "caller", "key"], name="idempotent_request_unique_key")]

    def __str__(self) -> str:
        return f"{self.key} {self.method} {self.path} ({self.status_code})"


class Job(models.Model):
    """Long work a person or an agent asked for (a bank import, a source-memory build), run by a
    Celery worker instead of inside the request (memweb.jobs). The request answers at once with the
    job; its page and its API status URL show the progress, then the result or the error."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    FINISHED = (Status.SUCCEEDED, Status.FAILED)

    workspace = workspace_field("jobs")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()
    kind = models.CharField(max_length=64, help_text="The registered job kind (an app's job_kinds) that runs it.")
    title = models.CharField(max_length=300, help_text="What was asked for, in words.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(null=True, blank=True, help_text="Empty until the job knows its size.")
    message = models.CharField(max_length=300, blank=True, help_text="What the job is doing or did.")
    error = models.TextField(blank=True)
    payload = models.JSONField(default=dict, blank=True, help_text="The arguments of the job's function.")
    upload = models.TextField(blank=True, help_text="A file the job reads (an uploaded bank); emptied when it ends.")
    result = models.JSONField(default=dict, blank=True, help_text="What it made, with `url` linking to it.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="jobs")
    worker = models.CharField(max_length=255, blank=True, help_text="The worker process that claimed it.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    queued_at = models.DateTimeField(default=timezone.now, help_text="When its message was last sent.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def progress_percent(self) -> int:
        if self.status == self.Status.SUCCEEDED:
            return 100
        return min(100, round(100 * self.done / self.total)) if self.total else 0


class SavedView(models.Model):
    """A named filter of a list page (its URL name and query string), kept for one user only."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    list_name = models.CharField(max_length=100, help_text="The list page's URL name, e.g. evaluation:episode_list.")
    name = models.CharField(max_length=100)
    query = models.CharField(max_length=2000, blank=True, help_text="The list's query string, without the page.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["user", "list_name", "name"], name="saved_view_unique_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.list_name})"


class SigningKeyFingerprint(models.Model):
    """The fingerprint of the SECRET_KEY that signs sessions and CSRF tokens on this database: every
    node of one deployment must share that key (memweb.nodes), or a session made on one node is
    refused on the next. One row; the key itself is never stored."""

    fingerprint = models.CharField(max_length=64)
    recorded_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.fingerprint[:12]}… since {self.recorded_at:%Y-%m-%d %H:%M}"


class DemoLoad(models.Model):
    """`manage.py load_demo` while it runs: one row, gone when it ends. The first start plays whole
    evaluation runs for minutes while the dashboard already serves, so every page says how far it is."""

    parts_done = models.PositiveIntegerField(default=0)
    parts_total = models.PositiveIntegerField()
    part = models.CharField(max_length=100, help_text="The app whose demo is loading now.")
    started_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"demo loading: {self.parts_done} of {self.parts_total}"


class AdminEvent(AppendOnly):
    """Who did what on the users and workspaces pages (memweb.user_admin): accounts created, deactivated
    and reactivated, roles given, changed and taken, workspaces renamed, archived and unarchived."""

    class Action(models.TextChoices):
        USER_CREATED = "user_created", "created user"
        USER_DEACTIVATED = "user_deactivated", "deactivated user"
        USER_REACTIVATED = "user_reactivated", "reactivated user"
        ROLE_GRANTED = "role_granted", "gave a role to"
        ROLE_CHANGED = "role_changed", "changed the role of"
        ROLE_REMOVED = "role_removed", "removed a role of"
        WORKSPACE_CREATED = "workspace_created", "created workspace"
        WORKSPACE_RENAMED = "workspace_renamed", "renamed workspace"
        WORKSPACE_ARCHIVED = "workspace_archived", "archived workspace"
        WORKSPACE_UNARCHIVED = "workspace_unarchived", "unarchived workspace"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    action = models.CharField(max_length=32, choices=Action.choices)
    target_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    workspace = models.ForeignKey(Workspace, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    old_role = models.CharField(max_length=16, choices=Role.choices, blank=True)
    new_role = models.CharField(max_length=16, choices=Role.choices, blank=True)
    # A renamed workspace's previous name: the row keeps what the rename overwrote.
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.actor} {self.get_action_display()} at {self.created_at:%Y-%m-%d %H:%M}"
