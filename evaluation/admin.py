from django.contrib import admin

from evaluation.models import Episode, Task, TaskSet
from evaluation.services import task_spec_update


@admin.register(TaskSet)
class TaskSetAdmin(admin.ModelAdmin):
    list_display = ("name", "is_builtin", "created_at")
    search_fields = ("name", "description")


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("external_id", "task_set", "domain", "split", "difficulty", "summary")
    list_filter = ("task_set", "domain", "split", "difficulty")
    search_fields = ("external_id", "summary")
    readonly_fields = ("version", "content_hash")

    def has_add_permission(self, request) -> bool:
        return False  # tasks come from the built-in set and validated imports

    def save_model(self, request, obj, form, change):
        """Through the task service, so that a change of gradable content makes a new version."""
        task_spec_update(task=obj, spec=obj.spec)


@admin.register(Episode)
class EpisodeAdmin(admin.ModelAdmin):
    list_display = ("pk", "task", "agent_backend", "customer_backend", "memory_kind", "success", "reward", "turns",
                    "status", "created_at")
    list_filter = ("success", "status", "memory_kind", "agent_backend", "customer_backend")
    search_fields = ("task__external_id",)
    raw_id_fields = ("task",)
    readonly_fields = [field.name for field in Episode._meta.fields]
