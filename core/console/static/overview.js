/* The overview's live region: swap #overview for a fresh /overview/live reading every data-refresh seconds (2: never
   faster, one request at a time), and show #stale when the last good reading is older than three intervals. Without
   this script the page reads the same (a <noscript> refresh reloads it). No dependency, no build step. */
(function () {
  "use strict";
  var region = document.getElementById("overview");
  if (!region || !window.fetch || !window.DOMParser) { return; }
  var interval = Math.max(2, Number(region.getAttribute("data-refresh")) || 2) * 1000;
  var url = region.getAttribute("data-live");
  var lastGood = Date.now();
  var failure = "";

  function showStale(reason) {
    var banner = document.getElementById("stale");
    var at = new Date(lastGood).toISOString().slice(11, 19);
    banner.textContent = "Not updated since " + at + " UTC (" + Math.round((Date.now() - lastGood) / 1000) +
      " s): " + reason + ". What is shown is the last good reading.";
    banner.hidden = false;
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("overview");
    if (!fresh) { throw new Error("the console answered with another page"); }
    var focused = document.activeElement && region.contains(document.activeElement) ? document.activeElement.id : "";
    region.replaceWith(fresh);
    region = fresh;
    if (focused && document.getElementById(focused)) { document.getElementById(focused).focus(); }
    lastGood = Date.now();
  }

  function refresh() {
    if (document.hidden) { setTimeout(refresh, interval); return; }
    fetch(url, { credentials: "same-origin", redirect: "manual", headers: { "Accept": "text/html" } })
      .then(function (answer) {
        if (answer.type === "opaqueredirect") { throw new Error("signed out: reload the page to sign in"); }
        if (!answer.ok) { throw new Error("the console answered " + answer.status); }
        return answer.text();
      })
      .then(swap)
      .then(function () { failure = ""; }, function (error) { failure = error.message || "no answer"; })
      .then(function () { setTimeout(refresh, interval); });
  }

  setTimeout(refresh, interval);
  setInterval(function () {  /* also while a request hangs: the reading's age is what matters */
    if (!document.hidden && Date.now() - lastGood > 3 * interval) { showStale(failure || "waiting for an answer"); }
  }, 1000);
}());
