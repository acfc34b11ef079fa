// The experience browser's Q-value histogram; redrawn when htmx swaps the results.
(function () {
  "use strict";
  let chart = null;

  function draw() {
    const canvas = document.getElementById("q-chart");
    const source = document.getElementById("q-chart-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    const data = JSON.parse(source.textContent);
    if (chart) chart.destroy();
    chart = new Chart(canvas, {
      type: "bar",
      data: { labels: data.labels, datasets: [{ label: "experiences", data: data.counts }] },
      options: { responsive: true, maintainAspectRatio: false, plugins: { legend: { display: false } },
                 scales: { x: { title: { display: true, text: "Q-value" } },
                           y: { beginAtZero: true, grace: "5%", ticks: { precision: 0 } } } },
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.body.addEventListener("htmx:afterSettle", function (event) {
    if (event.target.id === "experience-results") draw();
  });
})();
