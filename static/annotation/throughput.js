// Throughput page: judgments per day, one bar per annotator in each day, from the page's json_script block.
(function () {
  "use strict";
  const source = document.getElementById("throughput-data");
  const canvas = document.getElementById("throughput-chart");
  if (!source || !canvas || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const palette = ["#3949ab", "#ef8f00", "#2e7d32", "#8e24aa", "#00838f", "#c62828", "#6d4c41", "#546e7a"];
  new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.days,
      datasets: data.annotators.map((person, index) => ({
        label: person.annotator, data: person.counts, backgroundColor: palette[index % palette.length],
      })),
    },
    options: {
      maintainAspectRatio: false,
      scales: { y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "judgments" } } },
    },
  });
})();
