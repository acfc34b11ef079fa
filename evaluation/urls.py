from django.urls import path

from evaluation import views
from evaluation.feedback.urls import urlpatterns as feedback_urlpatterns
from evaluation.runs.urls import urlpatterns as runs_urlpatterns
from evaluation.scores.urls import urlpatterns as scores_urlpatterns

app_name = "evaluation"
urlpatterns = [
    path("tasks/", views.task_list, name="task_list"),
    path("tasks/load-builtin/", views.tasks_load_builtin, name="tasks_load_builtin"),
    path("tasks/import/", views.task_import, name="task_import"),
    path("tasks/import-benchmark/", views.benchmark_import, name="benchmark_import"),
    path("tasks/export/", views.task_export, name="task_export"),
    path("tasks/<int:task_id>/", views.task_detail, name="task_detail"),
    path("tasks/<int:task_id>/play/", views.task_play, name="task_play"),
    path("episodes/", views.episode_list, name="episode_list"),
    path("episodes/<int:episode_id>/", views.episode_detail, name="episode_detail"),
    path("traces/", views.trace_list, name="trace_list"),
    path("memory/<slug:slug>/effects/", views.memory_effects, name="memory_effects"),
    path("memory/orbs/<int:orb_id>/effect/", views.orb_effect, name="orb_effect"),
    path("memory/<slug:slug>/experience-effects/", views.experience_effects, name="experience_effects"),
    path("memory/experiences/<int:experience_id>/effect/", views.experience_effect, name="experience_effect"),
]
urlpatterns += runs_urlpatterns + feedback_urlpatterns + scores_urlpatterns
