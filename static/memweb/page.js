// Every page's frame: the phone menu, bar widths, and no htmx action that fails without a visible word.
(function () {
  "use strict";
  document.documentElement.classList.add("js");  // the phone menu hides the nav only when it can open it

  function setUpMenu() {
    const toggle = document.querySelector(".nav-toggle");
    const nav = document.getElementById("main-nav");
    if (toggle === null || nav === null) return;
    toggle.addEventListener("click", () => {
      const open = nav.classList.toggle("is-open");
      toggle.setAttribute("aria-expanded", String(open));
    });
  }

  // --- failures of htmx requests ------------------------------------------------------

  const MAX_MESSAGE = 400;

  function showMessage(text) {
    const region = document.getElementById("htmx-messages");
    const item = document.createElement("li");
    item.className = "flash flash-error";
    item.setAttribute("role", "alert");
    const close = document.createElement("button");
    close.type = "button";
    close.className = "btn btn-link btn-small flash-close";
    close.setAttribute("aria-label", "Dismiss this message");
    close.textContent = "×";
    close.addEventListener("click", () => item.remove());
    item.append(text.slice(0, MAX_MESSAGE), close);
    region.replaceChildren(item);  // the latest failure is the one that matters
  }

  // ninja's detail is a sentence, or a list of {loc, msg} for a refused body.
  function describeDetail(detail) {
    if (Array.isArray(detail)) {
      return detail.map((problem) => {
        const where = Array.isArray(problem.loc) ? problem.loc.filter((part) => part !== "body").join(".") : "";
        return (where ? where + ": " : "") + (problem.msg || JSON.stringify(problem));
      }).join("; ");
    }
    return typeof detail === "string" ? detail : JSON.stringify(detail);
  }

  function isJson(xhr) {
    return (xhr.getResponseHeader("Content-Type") || "").includes("json");
  }

  // A whole page (an error page, a page re-rendered with its form's errors) never goes into a
  // fragment's place: its message is shown instead.
  function isFragment(xhr) {
    return !isJson(xhr) && !/<html[\s>]/i.test(xhr.responseText);
  }

  function hasOwnMessage(html) {
    return /role="alert"|class="errorlist/.test(html);
  }

  function textOf(xhr) {
    if (isJson(xhr)) {
      try {
        const body = JSON.parse(xhr.responseText);
        return describeDetail(body.detail !== undefined ? body.detail : body);
      } catch (notJson) {
        return xhr.responseText;
      }
    }
    const doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
    const marked = doc.querySelector('[role="alert"], .errorlist, main h1, h1');
    return (marked || doc.body).textContent.replace(/\s+/g, " ").trim();
  }

  function failureMessage(xhr) {
    const what = textOf(xhr) || xhr.statusText;
    const prefix = xhr.status >= 500 ? "The server failed (" + xhr.status + "); nothing may have been saved" :
      "Refused (" + xhr.status + ")";
    return prefix + ": " + what;
  }

  // A 4xx fragment is the view's answer with its message beside the field (a row with "a reason is
  // required"): it is swapped in. Anything else (JSON, a whole page, a 5xx) becomes a page message.
  document.addEventListener("htmx:beforeSwap", (event) => {
    const xhr = event.detail.xhr;
    if (xhr.status < 400) return;
    if (xhr.status < 500 && isFragment(xhr)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      if (!hasOwnMessage(xhr.responseText)) showMessage(failureMessage(xhr));
      return;
    }
    event.detail.shouldSwap = false;
    showMessage(failureMessage(xhr));
  });

  document.addEventListener("htmx:sendError", () => {
    showMessage("The server could not be reached; nothing was sent. Check the connection and try again.");
  });

  // --- bar widths ----------------------------------------------------------------------
  // Bars carry their width as data-width (a percentage): the Content-Security-Policy refuses style
  // attributes, and a width set from script is allowed. Swapped-in partials get theirs on htmx:load.

  function setWidths(root) {
    root.querySelectorAll("[data-width]").forEach((bar) => { bar.style.width = bar.dataset.width + "%"; });
  }

  document.addEventListener("htmx:load", (event) => setWidths(event.target));

  function setUp() {
    setUpMenu();
    setWidths(document);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
