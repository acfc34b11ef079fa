from django.contrib import admin

from memweb.models import ApiKey, Job, LLMCall, Membership, TaskProbe, WorkerHeartbeat, Workspace


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = ("created_at", "role", "model", "status", "tokens_in", "tokens_out", "latency_ms", "attempts")
    list_filter = ("role", "status", "model")
    search_fields = ("error", "model")
    date_hierarchy = "created_at"
    readonly_fields = tuple(field.name for field in LLMCall._meta.fields)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "created_at")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = (MembershipInline,)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are issued on the API keys page (the secret is shown once there), never here."""

    list_display = ("name", "prefix", "user", "workspace", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at", "workspace")
    search_fields = ("name", "prefix", "user__username")
    fields = ("name", "prefix", "user", "workspace", "scopes", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "user", "workspace", "scopes", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ("hostname", "instance", "pid", "started_at", "seen_at")


@admin.register(TaskProbe)
class TaskProbeAdmin(admin.ModelAdmin):
    list_display = ("token", "queued_at", "done_at", "worker")
    readonly_fields = ("token", "queued_at", "done_at", "worker")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Jobs are started by the pages and the API and written by workers; here they are only read."""

    list_display = ("created_at", "title", "kind", "status", "done", "total", "created_by", "finished_at")
    list_filter = ("status", "kind")
    search_fields = ("title", "error")
    exclude = ("upload",)  # up to the import limit (64 MB): never loaded into a form
    readonly_fields = tuple(field.name for field in Job._meta.fields if field.name != "upload")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("upload")

    def has_add_permission(self, request):
        return False
