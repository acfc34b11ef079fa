"""A/A calibration of the paired run comparison, its power at a planted lift, and the planner check.

The outcomes are real scripted episodes without memory, played here over the built-in tasks, or
with `--run <id>` a finished run's stored verdicts (read through the registry's "runs" outcome
source); the comparisons resample them (see evaluation.calibration_aa), nothing is re-played per
comparison.
docs/STATISTICS.md records what this printed.
"""
import json

from django.core.management import BaseCommand, CommandError

from evaluation.calibration_aa import calibration_report, scripted_outcomes
from evaluation.environments import environment
from memweb.registry import outcome_source


class Command(BaseCommand):
    help = "How often the paired comparison names a winner between identical runs, and its power."

    def add_arguments(self, parser):
        parser.add_argument("--source-trials", type=int, default=4, help="scripted trials to play per task")
        parser.add_argument("--tasks", type=int, default=0, help="use the first N built-in tasks (0: all 130)")
        parser.add_argument("--error-rate", type=float, default=0.3, help="the scripted agent's rate per error kind")
        parser.add_argument("--trials", type=int, default=4, help="trials of each pseudo-run")
        parser.add_argument("--comparisons", type=int, default=1000)
        parser.add_argument("--lift", type=float, default=10.0, help="planted lift in points, for the power")
        parser.add_argument("--effect", type=float, default=7.0, help="effect in points for the planner check")
        parser.add_argument("--planner-comparisons", type=int, default=400, help="per trial count, 1 to 10")
        parser.add_argument("--power-comparisons", type=int, default=4000,
                            help="per trial count, 1 to 10, for predicted against simulated power")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
        parser.add_argument("--run", type=int, default=None,
                            help="reuse this finished run's stored verdicts instead of playing scripted episodes")

    def handle(self, *args, **options):
        matrix = self._stored(options["run"]) if options["run"] is not None else self._played(options)
        report = calibration_report(
            matrix, comparisons=options["comparisons"], trials=options["trials"], lift=options["lift"] / 100,
            effect=options["effect"] / 100, planner_comparisons=options["planner_comparisons"],
            power_comparisons=options["power_comparisons"], seed=options["seed"])
        origin = "scripted" if options["run"] is None else f"stored (run #{options['run']})"
        self.stdout.write(json.dumps(report, indent=2) if options["json"] else self._summary(report, origin))

    @staticmethod
    def _played(options: dict) -> dict:
        world = environment()
        rates = dict.fromkeys(world.error_kinds, options["error_rate"])
        specs = world.builtin_tasks()[: options["tasks"] or None]
        return scripted_outcomes(trials=options["source_trials"], error_rates=rates, seed=options["seed"], specs=specs)

    @staticmethod
    def _stored(run_id: int) -> dict:
        try:
            return outcome_source("runs")(run_id=run_id)
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def _summary(self, report: dict, origin: str) -> str:
        source, aa, power, planner = report["source"], report["aa"], report["power"], report["planner"]
        simulated = f"{planner['simulated']:.2f}" if planner["simulated"] else "not reached by 10"
        planned = f"{planner['planned']:.2f}" if planner["planned"] else "no number of"
        return "\n".join((
            f"source: {source['tasks']} tasks x {source['trials']} {origin} trials, success {source['success']:.3f}, "
            f"between-trial variance {source['variance']:.4f}",
            f"A/A: {aa['comparisons']} comparisons of {aa['trials']} x {aa['tasks']}: the verdict named a winner in "
            f"{aa['rate']:.1%}, p < 0.05 in {aa['p_rate']:.1%}",
            f"power at a planted {power['lift']:.0%} lift: {power['rate']:.1%} (p < 0.05: {power['p_rate']:.1%})",
            f"planner at {planner['effect']:.0%}: {planned} trials planned, {simulated} simulated"
            + (f" (ratio {planner['ratio']:.2f})" if planner["ratio"] else ""),
            "trials | " + " | ".join(str(row["trials"]) for row in report["power_check"]),
            "predicted power | " + " | ".join(f"{row['predicted']:.3f}" for row in report["power_check"]),
            "simulated power (sign-flip test) | " + " | ".join(f"{row['simulated']:.3f}" for row in report["power_check"]),
            "planner, predicted from the earlier pseudo-run | "
            + " | ".join(f"{value:.3f}" for value in planner["predicted_power"]),
            "planner, simulated verdict | " + " | ".join(f"{value:.3f}" for value in planner["simulated_power"]),
        ))
