// Learning-curve page: success against feedback batches written, redrawn after each htmx poll.
(function () {
  "use strict";
  const charts = window.memwebRunCharts;

  function render() {
    const source = document.getElementById("curve-data");
    if (!source) return;
    const curve = JSON.parse(source.textContent);
    charts.draw("chart-curve", [curve], "feedback batches written");
  }

  render();
  document.body.addEventListener("htmx:afterSettle", function (event) {
    if (event.target && event.target.id === "curve-live") render();
  });
})();
