from django.contrib import admin
from django.urls import include, path

from memweb import saved_view_views, views, webhook_views, workspace_views
from memweb.api import api

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.login_view, name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("health/", views.health, name="health"),
    path("health/probe/", views.probe_send, name="probe_send"),
    path("health/probe/<int:probe_id>/", views.probe_status, name="probe_status"),
    path("api-keys/", views.api_keys, name="api_keys"),
    path("api-keys/new/", views.api_key_create, name="api_key_create"),
    path("api-keys/<int:key_id>/revoke/", views.api_key_revoke, name="api_key_revoke"),
    path("webhooks/", webhook_views.webhooks, name="webhooks"),
    path("webhooks/new/", webhook_views.webhook_add, name="webhook_add"),
    path("webhooks/<int:webhook_id>/test/", webhook_views.webhook_test, name="webhook_test"),
    path("webhooks/<int:webhook_id>/switch/", webhook_views.webhook_toggle, name="webhook_toggle"),
    path("webhooks/<int:webhook_id>/delete/", webhook_views.webhook_remove, name="webhook_remove"),
    path("webhooks/deliveries/<int:delivery_id>/redeliver/", webhook_views.delivery_resend,
         name="webhook_delivery_resend"),
    path("views/save/", saved_view_views.saved_view_save, name="saved_view_save"),
    path("views/<int:view_id>/rename/", saved_view_views.saved_view_rename_page, name="saved_view_rename"),
    path("views/<int:view_id>/delete/", saved_view_views.saved_view_delete, name="saved_view_delete"),
    path("workspaces/", workspace_views.workspaces, name="workspaces"),
    path("workspaces/new/", workspace_views.workspace_create, name="workspace_create"),
    path("workspaces/switch/", workspace_views.workspace_switch, name="workspace_switch"),
    path("workspaces/members/new/", workspace_views.membership_add, name="membership_add"),
    path("workspaces/members/<int:membership_id>/remove/", workspace_views.membership_remove,
         name="membership_remove"),
    path("jobs/", views.job_list, name="job_list"),
    path("jobs/<int:job_id>/", views.job_detail, name="job_detail"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("orbs/", include("orbs.urls")),
    path("evaluation/", include("evaluation.urls")),
    path("annotation/", include("annotation.urls")),
]
