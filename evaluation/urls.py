from django.urls import path  # noqa: F401  (pages are added here as the app grows)

app_name = "evaluation"
urlpatterns: list = []
