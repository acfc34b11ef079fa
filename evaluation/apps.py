from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    # Read by memweb: navigation entries (label, url name, roles that see it)
    # and the Django model permissions each role's group receives.
    nav_items: tuple = (("Tasks", "evaluation:task_list", ("operator",)),)
    role_permissions: dict = {
        "operator": ("evaluation.view_taskset", "evaluation.add_taskset", "evaluation.view_task",
                     "evaluation.add_task", "evaluation.change_task", "evaluation.view_episode"),
    }
