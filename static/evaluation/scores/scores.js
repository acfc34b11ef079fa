// The new-score form shows only the settings of the chosen kind (without this script all are shown,
// each labelled; the server reads only the chosen kind's).
(function () {
  var form = document.getElementById("score-form");
  if (!form) return;
  var kind = form.querySelector("select[name=kind]");
  function show() {
    form.querySelectorAll("[data-used-by]").forEach(function (field) {
      field.hidden = field.getAttribute("data-used-by") !== kind.value;
    });
  }
  kind.addEventListener("change", show);
  show();
})();
