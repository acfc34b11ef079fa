from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    # Read by memweb: navigation entries (label, url name, roles that see it)
    # and the Django model permissions each role's group receives.
    nav_items: tuple = (
        ("Annotate", "annotation:queue", ("annotator",)),
        ("Campaigns", "annotation:campaign_list", ("operator",)),
    )
    home_counts: tuple = (
        ("Open annotation campaigns", "annotation.services.campaigns.campaigns_open_count", ("operator", "annotator"),
         "annotation:index"),
        ("Campaigns short of annotators", "annotation.services.staffing.campaigns_short_count", ("operator",),
         "annotation:campaign_list"),
    )
    # Read by memweb.registry: the scope of annotation's API routes (annotation.vocabulary).
    api_scopes: tuple = ("annotation.vocabulary.AnnotationScope",)
    # Annotators work through the pages only: no admin permissions, so the
    # admin site can never show them which side of a pair is human.
    role_permissions: dict = {
        "operator": (
            "annotation.view_campaign", "annotation.add_campaign", "annotation.change_campaign",
            "annotation.view_item", "annotation.add_item", "annotation.change_item",
            "annotation.view_feedbacktask", "annotation.view_assignment", "annotation.view_judgment",
        ),
    }
