// Review queue keyboard shortcuts: j/k move, a approve, r reject (focus the reason),
// e edit, o open, x select. The cursor follows an Orb's id, so a decision that swaps
// its row in place (htmx) keeps the cursor on it.
(function () {
  "use strict";
  let currentId = null;

  function rows() {
    return Array.from(document.querySelectorAll("#queue-table tr.orb-row"));
  }

  function currentIndex() {
    return rows().findIndex((row) => row.dataset.orbId === currentId);
  }

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable]") !== null;
  }

  function mark() {
    rows().forEach((row) => row.classList.toggle("is-current", row.dataset.orbId === currentId));
  }

  function select(index) {
    const all = rows();
    if (all.length === 0) return null;
    const row = all[Math.max(0, Math.min(index, all.length - 1))];
    currentId = row.dataset.orbId;
    mark();
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
    return row;
  }

  function currentRow() {
    const index = currentIndex();
    return index >= 0 ? rows()[index] : select(0);
  }

  const moves = { j: 1, k: -1 };
  const actions = {
    a: (row) => row.querySelector('[data-action="approve"]')?.click(),
    r: (row) => row.querySelector('[data-action="reject-reason"]')?.focus(),
    e: (row) => { if (row.dataset.editUrl) window.location.assign(row.dataset.editUrl); },
    o: (row) => window.location.assign(row.dataset.detailUrl),
    x: (row) => { const box = row.querySelector('input[type="checkbox"]'); if (box) box.checked = !box.checked; },
  };

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) {
      // Escape leaves the reason box so the shortcuts work again.
      if (event.key === "Escape") { event.target.blur(); mark(); }
      return;
    }
    if (event.key in moves) {
      event.preventDefault();
      const index = currentIndex();
      select(index < 0 ? 0 : index + moves[event.key]);
    } else if (event.key in actions) {
      const row = currentRow();
      if (row === null) return;
      event.preventDefault();
      actions[event.key](row);
    }
  });

  // A stale decision (409) or a missing reason (422) comes back as the row with its message, which
  // the page frame's script (static/memweb/page.js) swaps in like any failed htmx fragment.
  // New content (a swapped row, a new page of results): keep the cursor if its Orb is still listed.
  document.body.addEventListener("htmx:load", mark);
})();

// "Select all on this page": the header's checkbox ticks or clears every row's. Delegated, so it
// keeps working on the results htmx swaps in.
document.addEventListener("change", (event) => {
  if (!event.target.matches("[data-select-page]")) return;
  document.querySelectorAll('#queue-table input[name="selected"]').forEach((box) => {
    box.checked = event.target.checked;
  });
});
