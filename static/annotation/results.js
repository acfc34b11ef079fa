// Results page charts; the numbers come from the page's json_script block.
(function () {
  "use strict";
  const source = document.getElementById("results-data");
  if (!source || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const palette = ["#3949ab", "#ef8f00", "#2e7d32", "#8e24aa", "#00838f", "#c62828"];
  const percentAxis = { min: 0, max: 1, ticks: { callback: (value) => Math.round(value * 100) + "%" } };

  function chart(id, config) {
    const canvas = document.getElementById(id);
    if (canvas) new Chart(canvas, { ...config, options: { maintainAspectRatio: false, ...config.options } });
  }

  chart("wins-chart", {
    type: "bar",
    data: {
      labels: data.criteria,
      datasets: [
        { label: "Simulated preferred", data: data.simulated, backgroundColor: palette[0] },
        { label: "Tie", data: data.ties, backgroundColor: "#9aa3b5" },
        { label: "Human preferred", data: data.human, backgroundColor: palette[1] },
      ],
    },
    options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: "judgments" } } } },
  });

  chart("kappa-chart", {
    type: "bar",
    data: { labels: data.criteria, datasets: [{ label: "Fleiss' κ", data: data.kappa, backgroundColor: palette[2] }] },
    options: { scales: { y: { min: -1, max: 1 } }, plugins: { legend: { display: false } } },
  });

  // Reliability diagram: points on the diagonal are perfectly calibrated.
  const points = (rows) => rows.map((row) => ({ x: row.predicted, y: row.observed, n: row.n }));
  chart("reliability-chart", {
    type: "scatter",
    data: {
      datasets: [
        { label: "Simulated P(like)", data: points(data.fidelity.reliability), backgroundColor: palette[0], borderColor: palette[0], showLine: true, pointRadius: 5 },
        { label: "People: share of the others who liked", data: points(data.fidelity.ceiling), backgroundColor: palette[1], borderColor: palette[1], showLine: true, pointRadius: 5 },
        { label: "Perfect calibration", data: [{ x: 0, y: 0 }, { x: 1, y: 1 }], borderColor: "#9aa3b5", borderDash: [6, 4], showLine: true, pointRadius: 0 },
      ],
    },
    options: {
      scales: {
        x: { ...percentAxis, title: { display: true, text: "predicted probability of a like" } },
        y: { ...percentAxis, title: { display: true, text: "share of people who liked" } },
      },
      plugins: { tooltip: { callbacks: { label: (item) => item.dataset.label + ": " + Math.round(item.raw.x * 100) + "% → " + Math.round(item.raw.y * 100) + "%" + (item.raw.n ? " (" + item.raw.n + " ratings)" : "") } } },
    },
  });

  document.querySelectorAll("canvas.breakdown-chart").forEach(function (canvas) {
    const breakdown = data.breakdowns[Number(canvas.dataset.index)];
    chart(canvas.id, {
      type: "bar",
      data: {
        labels: breakdown.groups,
        datasets: breakdown.series.map((series, index) => ({
          label: series.criterion, data: series.values, backgroundColor: palette[index % palette.length],
        })),
      },
      options: {
        scales: { y: { ...percentAxis, title: { display: true, text: "simulated win rate (ties left out)" } } },
      },
    });
  });
})();
