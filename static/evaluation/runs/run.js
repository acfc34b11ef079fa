// Run page: charts and the task x trial heatmap from #run-live-data, redrawn after each htmx poll.
(function () {
  "use strict";
  const charts = window.memwebRunCharts;

  function heatmap(grid) {
    const box = document.getElementById("heatmap");
    if (!box) return;
    const episodeUrl = box.dataset.episodeUrl;
    box.style.setProperty("--trials", grid.trials);
    box.replaceChildren();
    const header = document.createElement("div");
    header.className = "heatmap-row heatmap-head";
    header.append(Object.assign(document.createElement("span"), { className: "heatmap-task", textContent: "task" }));
    for (let t = 1; t <= grid.trials; t++) {
      header.append(Object.assign(document.createElement("span"), { className: "heatmap-num", textContent: t }));
    }
    box.append(header);
    grid.tasks.forEach(function (task, row) {
      const line = document.createElement("div");
      line.className = "heatmap-row";
      line.append(Object.assign(document.createElement("span"), { className: "heatmap-task", textContent: task }));
      grid.cells[row].forEach(function (cell, trial) {
        const [state, episode] = cell;
        const node = document.createElement(episode ? "a" : "span");
        node.className = "cell cell-" + (state || "pending");
        node.title = task + ", trial " + (trial + 1) + ": " + (state || "not started");
        if (episode) node.href = episodeUrl.replace("/0/", "/" + episode + "/");
        line.append(node);
      });
      box.append(line);
    });
  }

  function render() {
    const source = document.getElementById("run-live-data");
    if (!source) return;
    const live = JSON.parse(source.textContent);
    const chart = live.charts;
    const label = chart.name + (chart.scripted ? " (scripted)" : "");
    charts.draw("chart-per-trial", [charts.series(chart, "per_trial", label, 0)], "trial");
    charts.draw("chart-cumulative", [charts.series(chart, "cumulative", label, 0)], "trial");
    charts.draw("chart-pass-k", [charts.series(chart, "pass_k", label, 0)], "k");
    heatmap(live.heatmap);
  }

  render();
  document.body.addEventListener("htmx:afterSettle", function (event) {
    if (event.target && event.target.id === "run-live") render();
  });
})();
