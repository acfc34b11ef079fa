"""Feedback pages, appended to evaluation/urls.py (app_name "evaluation")."""
from django.urls import path

from evaluation.feedback import views

urlpatterns = [
    path("feedback/", views.feedback_browser, name="feedback_browser"),
    path("feedback/calibration/", views.feedback_calibration, name="feedback_calibration"),
    path("feedback/calibration/save/", views.feedback_calibration_update, name="feedback_calibration_update"),
    path("feedback/calibration/recalibrate/", views.feedback_recalibrate, name="feedback_recalibrate"),
    path("feedback/calibration/fit/", views.feedback_calibration_fit, name="feedback_calibration_fit"),
    path("feedback/calibration/refit/", views.feedback_calibration_refit, name="feedback_calibration_refit"),
    path("feedback/profiles/", views.feedback_profiles, name="feedback_profiles"),
    path("feedback/profiles/new/", views.feedback_profile_edit, name="feedback_profile_new"),
    path("feedback/profiles/<int:profile_id>/", views.feedback_profile_edit, name="feedback_profile_edit"),
    path("feedback/episodes/<int:episode_id>/generate/", views.feedback_generate, name="feedback_generate"),
]
