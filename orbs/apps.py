from importlib import import_module

from django.apps import AppConfig


class OrbsConfig(AppConfig):
    name = "orbs"
    verbose_name = "Orbs (reflection memory)"
    # Read by memweb.registry: navigation entries, home counts and the Django model permissions
    # each role's group receives.
    nav_items: tuple = (
        ("Review queue", "orbs:queue", ("reviewer",)),
        ("Memory banks", "orbs:bank_list", ("reviewer", "operator")),
        ("Experiences (DMRM)", "orbs:experience_list", ("reviewer", "operator")),
    )
    home_counts: tuple = (
        ("Orbs awaiting review", "orbs.services.count_pending", ("reviewer",), "orbs:queue"),
    )
    # Read by memweb.registry: DMRM memory travels in the bank's file (orbs.services.transfer).
    bank_file_parts: tuple = ("orbs.dmrm.services.transfer",)
    # Read by memweb.registry: whether a webhook's bank exists in its workspace.
    bank_checks: tuple = ("orbs.services.banks.bank_slug_known",)
    # Read by memweb.registry: the functions background jobs of these kinds run (memweb.jobs).
    job_kinds: tuple = (
        ("orbs.bank_import", "orbs.services.transfer.bank_import_job"),
        ("orbs.bank_copy", "orbs.services.transfer.bank_copy_job"),
        ("orbs.dmrm_source_build", "orbs.dmrm.services.source.source_memory_build_job"),
        ("orbs.history_verify", "orbs.services.history.history_verify_job"),
        ("orbs.customer_erasure", "orbs.services.erasure.customer_erasure_job"),
        ("orbs.bulk_review", "orbs.services.bulk.bulk_review_job"),
    )
    # Read by memweb.registry: the tables whose rows form each bank's hash chain (orbs.services.history),
    # in the order rows written at one moment are chained.
    history_kinds: tuple = (
        "orbs.services.history.ORB_REVISION",
        "orbs.services.history.REVIEW_EVENT",
        "orbs.dmrm.services.history.SOURCE_MEMORY",
    )
    # Read by memweb.registry: orbs' own words (orbs.vocabulary): the scopes its routes ask for, the
    # webhook events it announces, the LLM roles its backends call.
    api_scopes: tuple = ("orbs.vocabulary.OrbsScope",)
    webhook_events: tuple = ("orbs.vocabulary.OrbsEvent",)
    llm_roles: tuple = ("orbs.vocabulary.OrbsLLMRole",)
    # Read by memweb.registry: on every worker heartbeat, episodes whose reflection message was lost are sent again.
    worker_beats: tuple = ("orbs.services.ingest.episodes_send_unsent",)
    role_permissions: dict = {
        "reviewer": (
            "orbs.view_memorybank", "orbs.view_orb", "orbs.change_orb", "orbs.view_reviewevent",
            "orbs.view_retrievallog", "orbs.view_episoderecord",
            "orbs.view_experience", "orbs.change_experience", "orbs.view_sourcememory", "orbs.view_dmrmretrievallog",
        ),
        "operator": (
            "orbs.view_memorybank", "orbs.add_memorybank", "orbs.change_memorybank", "orbs.view_orb",
            "orbs.view_retrievallog", "orbs.view_episoderecord",
            "orbs.view_experience", "orbs.view_dmrmsettings", "orbs.change_dmrmsettings", "orbs.view_sourcememory",
            "orbs.add_sourcememory", "orbs.view_dmrmretrievallog",
        ),
    }

    def import_models(self):
        # DMRM (orbs.dmrm) sits above the reflection memory in the stack but keeps its models in this
        # app, under one migration history; importing them here registers them without orbs.models
        # importing a level above it.
        super().import_models()
        import_module("orbs.dmrm.models")
        import_module("orbs.dialogues.models")  # raw past dialogues: the naive retrieval baselines
