"""Custom-score pages, appended to evaluation/urls.py (app_name "evaluation")."""
from django.urls import path

from evaluation.scores import views

urlpatterns = [
    path("tasks/sets/<int:task_set_id>/scores/", views.task_set_scores, name="task_set_scores"),
    path("tasks/sets/<int:task_set_id>/scores/compute/", views.task_set_score, name="task_set_score"),
    path("tasks/scores/<int:definition_id>/archive/", views.score_definition_archive, name="score_definition_archive"),
    path("runs/<int:run_id>/scores/compute/", views.run_score, name="run_score"),
]
