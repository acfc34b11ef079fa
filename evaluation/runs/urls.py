"""Pages of evaluation runs, appended to evaluation/urls.py (app_name "evaluation")."""
from django.urls import path

from evaluation.runs import study_views, views

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/plan/", views.run_plan, name="run_plan"),
    path("runs/compare/", views.run_compare, name="run_compare"),
    path("runs/compare/transcripts/", views.run_compare_transcripts, name="run_compare_transcripts"),
    path("memory-layers/", views.memory_layers_board_view, name="memory_layers_board"),
    path("runs/import/", views.run_import_view, name="run_import"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/cancel/", views.run_cancel_view, name="run_cancel"),
    path("runs/<int:run_id>/resume/", views.run_resume_view, name="run_resume"),
    path("runs/<int:run_id>/retry/", views.run_retry_view, name="run_retry"),
    path("runs/<int:run_id>/regrade/", views.run_regrade_view, name="run_regrade"),
    path("runs/<int:run_id>/feedback-curves/", views.feedback_curve_launch_view, name="feedback_curve_launch"),
    path("runs/feedback-curves/<int:curve_id>/", views.feedback_curve_detail, name="feedback_curve"),
    path("runs/<int:run_id>/to-study/", study_views.run_study_forms, name="run_study_forms"),
    path("runs/<int:run_id>/keep/<slug:target>/", study_views.run_keep, name="run_keep"),
    path("episodes/<int:episode_id>/to-study/", study_views.episode_study_forms, name="episode_study_forms"),
    path("episodes/<int:episode_id>/keep/<slug:target>/", study_views.episode_keep, name="episode_keep"),
    path("runs/<int:run_id>/export.json", views.run_export_json_view, name="run_export_json"),
    path("runs/<int:run_id>/export.csv", views.run_export_csv_view, name="run_export_csv"),
]
