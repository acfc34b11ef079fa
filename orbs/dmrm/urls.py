"""DMRM pages, appended to orbs/urls.py (app_name "orbs")."""
from django.urls import path

from orbs.dmrm import views

urlpatterns: list = [
    path("experiences/", views.experience_list, name="experience_list"),
    path("experiences/<int:pk>/review/", views.experience_review_action, name="experience_review"),
    path("banks/<slug:slug>/dmrm/", views.dmrm_settings, name="dmrm_settings"),
    path("banks/<slug:slug>/dmrm/save/", views.dmrm_settings_save, name="dmrm_settings_save"),
    path("banks/<slug:slug>/dmrm/source/", views.dmrm_source, name="dmrm_source"),
    path("banks/<slug:slug>/dmrm/source/build/", views.dmrm_source_build, name="dmrm_source_build"),
]
