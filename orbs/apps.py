from django.apps import AppConfig


class OrbsConfig(AppConfig):
    name = "orbs"
