// Saved views: htmx filter forms push the list's query into the address bar without reloading, so
// the saved-views forms take the query from there when they are sent.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    if (!event.target.closest("[data-saved-views]")) return;
    const query = event.target.querySelector("input[name=query]");
    if (query) query.value = window.location.search.replace(/^\?/, "");
  });
})();
