// Run page: charts and the task x trial heatmap from #run-live-data, redrawn after each htmx poll.
(function () {
  "use strict";
  const charts = window.memwebRunCharts;

  // A cell's state in words and as a glyph, so the grid does not speak in colour only.
  const STATES = {
    success: ["success", "✓"], failure: ["failure", "✗"], error: ["infrastructure error", "!"],
    running: ["playing", "…"], pending: ["not played yet", ""],
  };
  const COMPARE = {
    task: function () { return 0; },
    failing: function (a, b) { return b.failures - a.failures; },
    unstable: function (a, b) { return b.flips - a.flips; },
  };
  const KEEP = {
    all: function () { return true; },
    failing: function (row) { return row.failures > 0; },
    unstable: function (row) { return row.flips > 0; },
  };

  function heatmapRows(grid, controls) {
    const text = controls.task.value.trim().toLowerCase();
    const keep = KEEP[controls.show.value] || KEEP.all;
    const compare = COMPARE[controls.order.value] || COMPARE.task;
    return grid.tasks.map(function (task, i) {
      return { task: task, summary: grid.summaries[i] || "", cells: grid.cells[i], failures: grid.failures[i], flips: grid.flips[i] };
    }).filter(function (row) {
      return keep(row) && (!text || row.task.toLowerCase().includes(text) || row.summary.toLowerCase().includes(text));
    }).sort(function (a, b) { return compare(a, b) || a.task.localeCompare(b.task); });
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function heatmapRow(row, episodeUrl) {
    const line = element("tr");
    line.dataset.task = row.task;
    const label = element("th", "heatmap-task", row.task);
    label.scope = "row";
    label.title = row.summary;
    line.append(label);
    row.cells.forEach(function (cell, trial) {
      const [state, episode] = cell;
      const [words, glyph] = STATES[state || "pending"] || [state, ""];
      const node = element(episode ? "a" : "span", "cell cell-" + (state || "pending"), glyph);
      node.title = row.task + ", trial " + (trial + 1) + ": " + words;
      node.setAttribute("aria-label", "trial " + (trial + 1) + ": " + words);
      if (episode) node.href = episodeUrl.replace("/0/", "/" + episode + "/");
      const td = element("td");
      td.append(node);
      line.append(td);
    });
    const judged = row.cells.filter(function (cell) { return cell[0] === "success" || cell[0] === "failure"; }).length;
    const passed = row.cells.filter(function (cell) { return cell[0] === "success"; }).length;
    const errors = row.cells.filter(function (cell) { return cell[0] === "error"; }).length;
    const verdict = passed + "/" + judged + " passed" + (errors ? " · " + errors + " infrastructure error" + (errors > 1 ? "s" : "") : "") +
      (row.flips ? " · unstable (" + row.flips + " flip" + (row.flips > 1 ? "s" : "") + ")" : "");
    line.append(element("td", "heatmap-verdict small", verdict));
    return line;
  }

  function heatmap(grid) {
    const box = document.getElementById("heatmap");
    const controls = document.getElementById("heatmap-controls");
    if (!box || !controls) return;
    const rows = heatmapRows(grid, controls.elements);
    const table = element("table", "heatmap-table");
    const caption = element("caption", "sr-only", "Outcome of each task in each trial");
    const header = element("tr");
    header.append(element("th", "heatmap-task", "task"));
    for (let t = 1; t <= grid.trials; t++) header.append(element("th", "heatmap-num", t));
    header.append(element("th", "", "verdict"));
    header.querySelectorAll("th").forEach(function (th) { th.scope = "col"; });
    const body = element("tbody");
    rows.forEach(function (row) { body.append(heatmapRow(row, box.dataset.episodeUrl)); });
    table.append(caption, element("thead"), body);
    table.tHead.append(header);
    box.replaceChildren(table);
    document.getElementById("heatmap-count").textContent =
      rows.length + " of " + grid.tasks.length + " task" + (grid.tasks.length === 1 ? "" : "s") + " shown";
  }

  // The order, filter and search live in the address (so a link or a reload keeps them).
  function heatmapControls() {
    const controls = document.getElementById("heatmap-controls");
    if (!controls) return;
    const params = new URLSearchParams(window.location.search);
    ["order", "show", "task"].forEach(function (name) {
      if (params.has(name)) controls.elements[name].value = params.get(name);
    });
    if (!controls.elements.order.value) controls.elements.order.value = "task";
    if (!controls.elements.show.value) controls.elements.show.value = "all";
    controls.addEventListener("submit", function (event) { event.preventDefault(); });
    controls.addEventListener("input", function () {
      const chosen = new URLSearchParams(new FormData(controls));
      history.replaceState(null, "", "?" + chosen.toString());
      render();
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

  heatmapControls();
  render();
  document.body.addEventListener("htmx:afterSettle", function (event) {
    if (event.target && event.target.id === "run-live") render();
  });
})();
