// Judging and feedback-writing pages: active-time timer, drafts kept in this
// browser (resume where you left off), and keyboard shortcuts for judging.
(function () {
  "use strict";
  const form = document.getElementById("judge-form") || document.getElementById("write-form");
  if (!form || !form.dataset.draft) return;
  const storageKey = "memweb-annotation:" + form.dataset.draft;
  const timeField = form.querySelector("input[name=time_spent_ms]");
  const draft = readDraft();
  let elapsed = draft.elapsed || 0;
  let since = document.hidden ? null : Date.now();

  function readDraft() {
    try { return JSON.parse(localStorage.getItem(storageKey)) || {}; } catch (error) { return {}; }
  }

  // Only time with the page visible counts, so a tab left open overnight does not.
  function activeMs() { return elapsed + (since === null ? 0 : Date.now() - since); }
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { elapsed = activeMs(); since = null; } else { since = Date.now(); }
  });

  function saveDraft() {
    const fields = {};
    new FormData(form).forEach(function (value, name) {
      if (name !== "csrfmiddlewaretoken" && name !== "time_spent_ms") fields[name] = value;
    });
    try { localStorage.setItem(storageKey, JSON.stringify({ fields: fields, elapsed: activeMs() })); } catch (error) { /* storage full or disabled: drafts are a convenience */ }
  }

  function restoreDraft() {
    Object.entries(draft.fields || {}).forEach(function ([name, value]) {
      const field = form.elements.namedItem(name);
      if (!field || field.disabled) return;
      if (field instanceof RadioNodeList) {
        if (!field.value) field.value = value;
      } else if (!field.value) {
        field.value = value;
      }
    });
  }

  restoreDraft();
  form.addEventListener("change", saveDraft);
  form.addEventListener("input", saveDraft);
  window.addEventListener("pagehide", saveDraft);
  form.addEventListener("submit", function (event) {
    if (!form.checkValidity()) { event.preventDefault(); form.reportValidity(); return; }
    timeField.value = String(Math.round(activeMs()));
    const button = form.querySelector("button[type=submit]");
    // A second press would only re-send the same answer; the server keeps one anyway.
    if (button) { button.disabled = true; }
    try { localStorage.removeItem(storageKey); } catch (error) { /* nothing to clean */ }
  });

  const criteria = Array.from(form.querySelectorAll("fieldset.criterion:not([disabled])"));
  if (form.id === "write-form") {
    form.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
    });
    return;
  }
  if (!criteria.length) return;
  const keys = { "1": "A", a: "A", "2": "B", b: "B", "3": "tie", t: "tie" };
  let current = Math.max(0, criteria.findIndex(function (fieldset) { return !chosen(fieldset); }));

  function chosen(fieldset) { return fieldset.querySelector("input[type=radio]:checked"); }

  function highlight(index) {
    current = Math.min(Math.max(index, 0), criteria.length - 1);
    criteria.forEach(function (fieldset, position) { fieldset.classList.toggle("is-current", position === current); });
  }

  function choose(option) {
    const radio = criteria[current].querySelector('input[type=radio][value="' + option + '"]');
    if (!radio) return;
    radio.checked = true;
    saveDraft();
    const next = criteria.findIndex(function (fieldset) { return !chosen(fieldset); });
    // Focus follows the highlight, so the focus ring and the highlight never point at different criteria.
    const target = next === -1 ? radio : criteria[next].querySelector("input[type=radio]");
    target.focus();
    highlight(next === -1 ? current : next);
  }

  function move(index) {
    highlight(index);
    const fieldset = criteria[current];
    (chosen(fieldset) || fieldset.querySelector("input[type=radio]")).focus();
  }

  criteria.forEach(function (fieldset, index) {
    fieldset.addEventListener("focusin", function () { highlight(index); });
    fieldset.addEventListener("click", function () { highlight(index); });
  });

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.isComposing) return;
    // Keys typed in another form (skip or flag this item) belong to that form.
    const owner = event.target.closest ? event.target.closest("form") : null;
    if (owner && owner !== form) return;
    const inComment = event.target instanceof HTMLTextAreaElement;
    if (event.key === "Enter" && (!inComment || event.ctrlKey || event.metaKey)) {
      if (event.target instanceof HTMLButtonElement || event.target instanceof HTMLAnchorElement) return;
      event.preventDefault();
      form.requestSubmit();
      return;
    }
    // Digits typed into the satisfaction list choose a score there, not a side.
    if (inComment || event.target instanceof HTMLSelectElement || event.ctrlKey || event.metaKey) return;
    const key = event.key.toLowerCase();
    if (keys[key]) { event.preventDefault(); choose(keys[key]); }
    else if (key === "j") { event.preventDefault(); move(current + 1); }
    else if (key === "k") { event.preventDefault(); move(current - 1); }
  });

  highlight(current);
})();
