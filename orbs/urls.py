from django.urls import path

from orbs import views
from orbs.dmrm.urls import urlpatterns as dmrm_urlpatterns

app_name = "orbs"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("bulk/", views.bulk, name="bulk"),
    path("<int:orb_id>/", views.orb_detail, name="detail"),
    path("<int:orb_id>/provenance/", views.orb_provenance_page, name="provenance"),
    path("<int:orb_id>/approve/", views.approve, name="approve"),
    path("<int:orb_id>/reject/", views.reject, name="reject"),
    path("<int:orb_id>/merge/", views.merge, name="merge"),
    path("<int:orb_id>/merge/undo/", views.merge_undo, name="merge_undo"),
    path("<int:orb_id>/edit/", views.edit, name="edit"),
    path("<int:orb_id>/duplicates/", views.duplicates, name="duplicates"),
    path("<int:orb_id>/delete/", views.delete, name="delete"),
    path("<int:orb_id>/restore/", views.restore, name="restore"),
    path("proposals/<int:proposal_id>/decide/", views.proposal_decide, name="proposal_decide"),
    path("banks/", views.bank_list, name="bank_list"),
    path("banks/new/", views.bank_create, name="bank_create"),
    path("banks/import/", views.bank_import_page, name="bank_import"),
    path("banks/<slug:slug>/", views.bank_detail, name="bank_detail"),
    path("banks/<slug:slug>/policy/", views.bank_policy, name="bank_policy"),
    path("banks/<slug:slug>/export/", views.bank_export_download, name="bank_export"),
    path("banks/<slug:slug>/copy/", views.bank_copy_page, name="bank_copy"),
    path("banks/<slug:slug>/history/verify/", views.bank_history_verify, name="bank_history_verify"),
    path("banks/<slug:slug>/delete/", views.bank_delete, name="bank_delete"),
    path("banks/<slug:slug>/restore/", views.bank_restore_page, name="bank_restore"),
    path("banks/<slug:slug>/erase/", views.customer_erase_page, name="customer_erase"),
    path("customers/", views.customer_timeline_page, name="customer_timeline"),
    path("customers/erase/", views.customer_timeline_erase, name="customer_timeline_erase"),
]
urlpatterns += dmrm_urlpatterns
