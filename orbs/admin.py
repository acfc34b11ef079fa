from django.contrib import admin

from orbs.models import EpisodeRecord, MemoryBank, Orb, RetrievalLog, ReviewEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    """Memories, their banks, and audit and log rows are written by the services only: an edit here would
    skip review, revisions, the vector and the history chain (verify_history would then report it)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(MemoryBank)
class MemoryBankAdmin(ReadOnlyAdmin):
    """Its settings and approval policy change on the bank's pages, through the bank services."""

    list_display = ("name", "slug", "retrieval_k", "approved_only", "min_score", "auto_approve", "embedding_model")
    list_filter = ("auto_approve", "approved_only", "embedding_model")
    search_fields = ("name", "slug")


@admin.register(Orb)
class OrbAdmin(ReadOnlyAdmin):
    list_display = ("id", "lineage_id", "revision", "short_hash", "bank", "status", "emotion", "domain", "source",
                    "reflector_backend", "times_retrieved", "created_at")
    list_filter = ("status", "bank", "emotion", "domain", "source", "reflector_backend", "embedding_model")
    search_fields = ("content_hash", "obs", "outcome", "customer_key", "source_label", "episode_ref")
    date_hierarchy = "created_at"
    exclude = ("vector",)


@admin.register(ReviewEvent)
class ReviewEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "orb", "action", "actor_name", "note")
    list_filter = ("action", "at")
    search_fields = ("orb__content_hash", "actor_name", "note")
    date_hierarchy = "at"


@admin.register(RetrievalLog)
class RetrievalLogAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "bank", "client", "query", "k", "search_ms", "outcome_success")
    list_filter = ("bank", "client", "rewriter_backend", "outcome_success")
    search_fields = ("query", "rewritten_query", "client")
    date_hierarchy = "created_at"


@admin.register(EpisodeRecord)
class EpisodeRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "bank", "status", "source", "source_label", "episode_ref", "attempts", "created_at")
    list_filter = ("status", "bank", "source")
    search_fields = ("source_label", "episode_ref", "error")
