from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    # Read by memweb: navigation entries (label, url name, roles that see it)
    # and the Django model permissions each role's group receives.
    nav_items: tuple = ()
    role_permissions: dict = {}
