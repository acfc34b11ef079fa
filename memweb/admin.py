from django.contrib import admin

from memweb.models import ApiKey, LLMCall, TaskProbe, WorkerHeartbeat

admin.site.site_header = "memweb administration"
admin.site.site_title = "memweb admin"


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = ("created_at", "role", "model", "status", "tokens_in", "tokens_out", "latency_ms", "attempts")
    list_filter = ("role", "status", "model")
    search_fields = ("error", "model")
    date_hierarchy = "created_at"
    readonly_fields = tuple(field.name for field in LLMCall._meta.fields)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are issued on the API keys page (the secret is shown once there), never here."""

    list_display = ("name", "prefix", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "prefix", "user__username")
    fields = ("name", "prefix", "user", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "user", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ("hostname", "pid", "started_at", "seen_at")


@admin.register(TaskProbe)
class TaskProbeAdmin(admin.ModelAdmin):
    list_display = ("token", "queued_at", "done_at", "worker")
    readonly_fields = ("token", "queued_at", "done_at", "worker")
