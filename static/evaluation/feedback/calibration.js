// Calibration page: P(·|S) curves, and the realised score histogram (redrawn when htmx swaps the rates).
(function () {
  "use strict";
  if (typeof Chart === "undefined") return;
  const charts = {};

  function data(id) {
    const source = document.getElementById(id);
    return source ? JSON.parse(source.textContent) : null;
  }

  function draw(canvasId, config) {
    const canvas = document.getElementById(canvasId);
    if (charts[canvasId]) charts[canvasId].destroy();
    if (canvas) charts[canvasId] = new Chart(canvas, { ...config, options: { maintainAspectRatio: false, ...config.options } });
  }

  function curves() {
    const d = data("curves-data");
    if (!d) return;
    const line = (label, values, color, dash) => ({ label, data: values, borderColor: color, backgroundColor: color, borderDash: dash || [], tension: 0.25 });
    draw("curves-chart", {
      type: "line",
      data: {
        labels: d.score,
        datasets: [
          line("P(like|S)", d.p_like, "#2e7d32"),
          line("P(dislike|S)", d.p_dislike, "#c62828"),
          line("P(copy|S), long output", d.p_copy, "#3949ab", [6, 4]),
        ],
      },
      options: { scales: { x: { title: { display: true, text: "satisfaction S" } }, y: { beginAtZero: true, title: { display: true, text: "probability" } } } },
    });
  }

  function histogram() {
    const d = data("histogram-data");
    if (!d) return;
    draw("histogram-chart", {
      type: "bar",
      data: {
        labels: d.scores,
        datasets: [
          { label: "these episodes", data: d.realised, backgroundColor: "#ef8f00" },
          { label: "calibration p(S)", data: d.p_score, backgroundColor: "#9aa3b5" },
        ],
      },
      options: { scales: { x: { title: { display: true, text: "satisfaction S" } }, y: { beginAtZero: true, title: { display: true, text: "share" } } } },
    });
  }

  curves();
  histogram();
  document.body.addEventListener("htmx:afterSwap", histogram);
})();
