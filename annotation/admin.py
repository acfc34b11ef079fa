"""Admin views for operators and admins (annotators hold no admin permissions)."""
from django.contrib import admin

from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "annotators_per_item", "allow_ties", "deadline", "created_at")
    list_filter = ("status", "allow_ties")
    search_fields = ("name",)


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("pk", "campaign", "language", "task_format", "domain", "is_gold", "source_ref")
    list_filter = ("campaign", "language", "task_format", "domain", "is_gold")
    search_fields = ("source_ref", "task_description")
    raw_id_fields = ("human_feedback_author",)


@admin.register(FeedbackTask)
class FeedbackTaskAdmin(admin.ModelAdmin):
    list_display = ("pk", "campaign", "item", "status", "writer", "assigned_at", "completed_at")
    list_filter = ("campaign", "status")
    raw_id_fields = ("item", "writer")


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("pk", "campaign", "item", "annotator", "status", "side_a_is_human", "assigned_at", "completed_at")
    list_filter = ("campaign", "status")
    raw_id_fields = ("item", "annotator")
    readonly_fields = ("token", "side_a_is_human")


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    list_display = ("pk", "assignment", "preferences", "time_spent_ms", "created_at")
    list_filter = ("assignment__campaign",)
    raw_id_fields = ("assignment",)
    readonly_fields = ("choices", "preferences")
