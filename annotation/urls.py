from django.urls import path

from annotation import views

app_name = "annotation"
urlpatterns = [
    path("", views.index, name="index"),
    path("campaigns/", views.campaign_list, name="campaign_list"),
    path("campaigns/new/", views.campaign_create, name="campaign_create"),
    path("campaigns/import/", views.campaign_import, name="campaign_import"),
    path("campaigns/<int:pk>/", views.campaign_detail, name="campaign_detail"),
    path("campaigns/<int:pk>/edit/", views.campaign_edit, name="campaign_edit"),
    path("campaigns/<int:pk>/progress/", views.campaign_progress, name="campaign_progress"),
    path("campaigns/<int:pk>/status/", views.campaign_status, name="campaign_status"),
    path("campaigns/<int:pk>/upload/", views.campaign_upload, name="campaign_upload"),
    path("campaigns/<int:pk>/items/<int:item_id>/edit/", views.item_edit, name="item_edit"),
    path("campaigns/<int:pk>/items/<int:item_id>/withdraw/", views.item_withdraw, name="item_withdraw"),
    path("campaigns/<int:pk>/disagreements/", views.campaign_disagreements, name="campaign_disagreements"),
    path("campaigns/<int:pk>/throughput/", views.campaign_throughput, name="campaign_throughput"),
    path("campaigns/<int:pk>/results/", views.campaign_results, name="campaign_results"),
    path("campaigns/<int:pk>/export/<str:kind>.<str:fmt>", views.campaign_export, name="campaign_export"),
    path("campaigns/<int:pk>/standing/<int:annotator_id>/", views.participant_standing, name="participant_standing"),
    path("queue/", views.queue, name="queue"),
    path("campaigns/<int:pk>/judge-next/", views.judge_next, name="judge_next"),
    path("campaigns/<int:pk>/write-next/", views.write_next, name="write_next"),
    path("judge/<uuid:token>/", views.judge, name="judge"),
    path("write/<uuid:token>/", views.write, name="write"),
    path("campaigns/<int:pk>/roster/add/", views.roster_add, name="roster_add"),
    path("campaigns/<int:pk>/roster/<int:annotator_id>/remove/", views.roster_remove, name="roster_remove"),
    path("campaigns/<int:pk>/items/<int:item_id>/clear-flags/", views.item_flags_clear, name="item_flags_clear"),
    path("campaigns/<int:pk>/items/<int:item_id>/adjudicate/", views.item_adjudicate, name="item_adjudicate"),
    path("judge/<uuid:token>/skip/", views.judge_skip, name="judge_skip"),
    path("judge/<uuid:token>/flag/", views.judge_flag, name="judge_flag"),
    path("write/<uuid:token>/skip/", views.write_skip, name="write_skip"),
    path("write/<uuid:token>/flag/", views.write_flag, name="write_flag"),
]
