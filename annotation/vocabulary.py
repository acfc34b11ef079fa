"""The words annotation adds to memweb's shared vocabulary (declared on AnnotationConfig, read by
memweb.registry): the API scope of its routes."""
from django.db.models import TextChoices


class AnnotationScope(TextChoices):
    ANNOTATION = "annotation", "annotation — manage campaigns, or annotate as the key's user"
