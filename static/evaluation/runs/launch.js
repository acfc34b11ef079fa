// Launch form: only the chosen memory layer's fields show (and are posted: hidden ones are disabled);
// a refused launch's error summary takes the focus, and each of its links focuses its field.
(function () {
  "use strict";
  const form = document.getElementById("launch-form");
  if (!form) return;
  const presetLayers = JSON.parse(document.getElementById("preset-layers").textContent);

  function chosenLayer() {
    return presetLayers[form.elements.preset.value] || form.elements.memory_mode.value;
  }

  function showLayerFields() {
    const layer = chosenLayer();
    form.querySelectorAll("[data-used-by]").forEach(function (field) {
      const used = field.dataset.usedBy.split(" ").includes(layer);
      field.hidden = !used;
      field.querySelectorAll("input, select, textarea").forEach(function (input) { input.disabled = !used; });
    });
    form.querySelectorAll("[data-layer-group]").forEach(function (group) {
      group.hidden = !group.querySelector("[data-used-by]:not([hidden])");
    });
  }

  function focusErrors() {
    const summary = document.getElementById("launch-errors");
    if (!summary) return;
    summary.focus();
    summary.addEventListener("click", function (event) {
      const link = event.target.closest("a[href^='#']");
      const field = link && document.getElementById(link.getAttribute("href").slice(1));
      if (!field) return;
      event.preventDefault();
      field.scrollIntoView({ block: "center" });
      field.focus();
    });
  }

  form.elements.memory_mode.addEventListener("change", showLayerFields);
  form.elements.preset.addEventListener("change", showLayerFields);
  showLayerFields();
  focusErrors();
})();
