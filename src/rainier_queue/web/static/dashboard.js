// SPDX-License-Identifier: MIT
// The dashboard's only script: keeps the page up to date by polling, and "select all".
// Plain JavaScript, no build step and nothing fetched from elsewhere. Every page is
// rendered on the server; a poll fetches the same page again and swaps its <main>,
// unless the reader is in the middle of something (a box ticked, a field in focus)
// or the tab is hidden.
(function () {
  "use strict";

  function wireSelectAll(root) {
    root.querySelectorAll("input[data-select-all]").forEach(function (box) {
      box.addEventListener("change", function () {
        var name = box.getAttribute("data-select-all");
        root.querySelectorAll('input[type="checkbox"][name="' + name + '"]').forEach(
          function (other) { other.checked = box.checked; }
        );
      });
    });
  }

  var live = document.getElementById("live");
  if (!live) { return; }
  wireSelectAll(live);
  var every = parseFloat(live.getAttribute("data-poll") || "0") * 1000;
  if (!(every > 0)) { return; }

  function busy() {
    if (live.querySelector("input:checked")) { return true; }
    var active = document.activeElement;
    return Boolean(active && active !== document.body && live.contains(active));
  }

  function refresh() {
    if (document.hidden || busy()) { return; }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null || busy()) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live");
        if (!fresh) { return; }
        live.replaceChildren.apply(
          live, Array.prototype.map.call(fresh.childNodes, function (node) {
            return document.importNode(node, true);
          })
        );
        wireSelectAll(live);
        live.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the next poll tries again */ });
  }

  window.setInterval(refresh, every);
})();
