// Home page trends: one Chart.js chart per canvas[data-chart], from the json_script it names.
// Data: {labels, series: [{label, values}], unit: "%" | "$", kind: "line" | "bar"}.
(function () {
  "use strict";
  const palette = ["#3949ab", "#ef8f00", "#2e7d32", "#8e24aa", "#00838f", "#c62828", "#6d4c41"];

  function format(unit, value) {
    if (value == null) return "—";
    return unit === "$" ? "$" + value.toFixed(4) : value + unit;
  }

  function draw(canvas) {
    const data = JSON.parse(document.getElementById(canvas.dataset.chart).textContent);
    const datasets = data.series.map(function (series, index) {
      const colour = palette[index % palette.length];
      return { label: series.label, data: series.values, borderColor: colour, backgroundColor: colour,
               spanGaps: true, tension: 0.15 };
    });
    const stacked = data.kind === "bar";
    // A line through one day is a lone dot against the axis: one day reads better as bars, centred.
    const singleDay = data.labels.length === 1;
    new Chart(canvas, {
      type: singleDay ? "bar" : data.kind,
      data: { labels: data.labels, datasets: datasets },
      options: {
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: { stacked: stacked, offset: true, title: { display: true, text: "day" } },
          y: { stacked: stacked, min: 0, max: data.unit === "%" ? 100 : undefined,
               ticks: { callback: (value) => format(data.unit, value) } },
        },
        plugins: { tooltip: { callbacks: { label: (ctx) => ctx.dataset.label + ": " + format(data.unit, ctx.raw) } } },
      },
    });
    canvas.dataset.drawn = "true";
  }

  if (typeof Chart !== "undefined") document.querySelectorAll("canvas[data-chart]").forEach(draw);
})();
