// Compare page: every selected run overlaid on each chart (data from #compare-data).
(function () {
  "use strict";
  const charts = window.memwebRunCharts;
  const source = document.getElementById("compare-data");
  if (!source) return;
  const runs = JSON.parse(source.textContent);
  const label = (run) => "#" + run.id + " " + run.name + (run.scripted ? " (scripted)" : "");
  [["chart-per-trial", "per_trial", "trial"], ["chart-cumulative", "cumulative", "trial"], ["chart-pass-k", "pass_k", "k"]]
    .forEach(function ([id, name, axis]) {
      charts.draw(id, runs.map((run, index) => charts.series(run, name, label(run), index)), axis);
    });
})();
