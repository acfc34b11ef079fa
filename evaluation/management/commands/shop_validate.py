"""Validate shop tasks: every gold solution replays to success and a do-nothing agent fails.

With --scripted, also play each task with the error-free scripted agent and the agenda customer.
"""
from django.core.management import BaseCommand, CommandError

from evaluation.models import TaskSet
from evaluation.shop.customers import AgendaCustomer
from evaluation.shop.episode import episode_play
from evaluation.shop.scripted_agent import ScriptedAgent
from evaluation.shop.task_specs import tasks_generate
from evaluation.shop.validate import spec_errors


class Command(BaseCommand):
    help = "Check that every task is solvable (default: the generated built-in tasks)."

    def add_arguments(self, parser):
        parser.add_argument("--task-set", default="", help="validate this task set from the database instead")
        parser.add_argument("--scripted", action="store_true", help="also play each task with the scripted agent")

    def handle(self, *args, task_set: str, scripted: bool, **options):
        specs = self._specs(task_set)
        broken = 0
        for spec in specs:
            problems = spec_errors(spec)[1] + (self._played(spec) if scripted else [])
            if problems:
                broken += 1
                self.stdout.write(self.style.ERROR(f"{spec.get('id', '?')}: " + "; ".join(problems)))
        if broken:
            raise CommandError(f"{broken} of {len(specs)} tasks are broken")
        checks = "gold solutions replay, do-nothing agent fails" + (", scripted agent solves" if scripted else "")
        self.stdout.write(self.style.SUCCESS(f"All {len(specs)} tasks are valid ({checks})."))

    def _specs(self, name: str) -> list[dict]:
        if not name:
            return tasks_generate()
        found = TaskSet.objects.filter(name=name).first()
        if found is None:
            raise CommandError(f"no task set {name!r}")
        return list(found.tasks.order_by("external_id").values_list("spec", flat=True))

    def _played(self, spec: dict) -> list[str]:
        outcome = episode_play(task=spec, agent=ScriptedAgent(seed=0, key=spec["id"]),
                               customer=AgendaCustomer(task=spec, seed=0))
        return [] if outcome.reward.success else [f"the error-free scripted agent fails: {outcome.reward.breakdown}"]
