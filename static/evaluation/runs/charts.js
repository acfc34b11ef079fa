// Line charts with 95% interval bands for the run and compare pages (Chart.js 4).
// Each series is {label, colour, x, value, low, high}; x values become the chart's labels.
window.memwebRunCharts = (function () {
  "use strict";
  const palette = ["#3949ab", "#ef8f00", "#2e7d32", "#8e24aa", "#00838f", "#c62828"];
  const percent = (value) => Math.round(value * 100) + "%";

  function datasets(series, index) {
    const colour = palette[index % palette.length];
    const band = colour + "33";
    return [
      { label: series.label + " (95% low)", data: series.low, borderWidth: 0, pointRadius: 0, fill: false,
        backgroundColor: band, borderColor: band, band: true },
      { label: series.label + " (95% high)", data: series.high, borderWidth: 0, pointRadius: 0, fill: "-1",
        backgroundColor: band, borderColor: band, band: true },
      { label: series.label, data: series.value, borderColor: colour, backgroundColor: colour, tension: 0.15,
        spanGaps: true },
    ];
  }

  function config(seriesList, xTitle) {
    const longest = seriesList.reduce((a, s) => (s.x.length > a.length ? s.x : a), []);
    return {
      type: "line",
      data: { labels: longest, datasets: seriesList.flatMap(datasets) },
      options: {
        maintainAspectRatio: false,
        animation: false,
        scales: {
          y: { min: 0, max: 1, ticks: { callback: percent } },
          x: { title: { display: true, text: xTitle } },
        },
        plugins: {
          legend: { labels: { filter: (item, data) => !data.datasets[item.datasetIndex].band } },
          tooltip: { callbacks: { label: (ctx) => ctx.dataset.label + ": " + (ctx.raw == null ? "—" : percent(ctx.raw)) } },
        },
      },
    };
  }

  // Draw (or redraw in place) the chart on canvas `id`.
  function draw(id, seriesList, xTitle) {
    const canvas = document.getElementById(id);
    if (!canvas || typeof Chart === "undefined") return;
    const next = config(seriesList, xTitle);
    const existing = Chart.getChart(canvas);
    if (existing) {
      existing.data = next.data;
      existing.update();
    } else {
      new Chart(canvas, next);
    }
    canvas.dataset.points = String(seriesList.reduce((n, s) => n + s.value.filter((v) => v != null).length, 0));
  }

  function series(chart, name, label, index) {
    const data = chart[name];
    return { label: label, x: data.x, value: data.value, low: data.low, high: data.high, index: index };
  }

  return { draw: draw, series: series, palette: palette };
})();
