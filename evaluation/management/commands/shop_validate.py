"""Validate tasks: every gold solution replays to success and a do-nothing agent fails (each task by
its own environment's validator).

With --scripted, also play each task with the error-free scripted agent and scripted customer.
"""
from django.core.management import BaseCommand, CommandError

from evaluation.environments import DEFAULT_ENVIRONMENT, Environment, UnknownEnvironment, environment
from evaluation.models import TaskSet


class Command(BaseCommand):
    help = "Check that every task is solvable (default: the generated built-in tasks of the shop)."

    def add_arguments(self, parser):
        parser.add_argument("--task-set", default="", help="validate this task set from the database instead")
        parser.add_argument("--environment", default=DEFAULT_ENVIRONMENT,
                            help="whose built-in tasks to validate when no task set is named")
        parser.add_argument("--scripted", action="store_true", help="also play each task with the scripted agent")

    def handle(self, *args, task_set: str, scripted: bool, **options):
        specs = self._specs(task_set, options["environment"])
        broken = 0
        for world, spec in specs:
            problems = world.spec_errors(spec)[1] + (self._played(world, spec) if scripted else [])
            if problems:
                broken += 1
                self.stdout.write(self.style.ERROR(f"{spec.get('id', '?')}: " + "; ".join(problems)))
        if broken:
            raise CommandError(f"{broken} of {len(specs)} tasks are broken")
        checks = "gold solutions replay, do-nothing agent fails" + (", scripted agent solves" if scripted else "")
        self.stdout.write(self.style.SUCCESS(f"All {len(specs)} tasks are valid ({checks})."))

    def _specs(self, name: str, environment_name: str) -> list[tuple[Environment, dict]]:
        if not name:
            world = self._environment(environment_name)
            return [(world, spec) for spec in world.builtin_tasks()]
        found = TaskSet.objects.filter(name=name).first()
        if found is None:
            raise CommandError(f"no task set {name!r}")
        return [(self._environment(world), spec) for world, spec in
                found.tasks.order_by("external_id").values_list("environment", "spec")]

    @staticmethod
    def _environment(name: str) -> Environment:
        try:
            return environment(name)
        except UnknownEnvironment as exc:
            raise CommandError(str(exc)) from None

    @staticmethod
    def _played(world: Environment, spec: dict) -> list[str]:
        outcome = world.play(task=spec, agent=world.scripted_agent(seed=0, key=spec["id"]),
                             customer=world.scripted_customer(task=spec, seed=0))
        return [] if outcome.reward.success else [f"the error-free scripted agent fails: {outcome.reward.breakdown}"]
