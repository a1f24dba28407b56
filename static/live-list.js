// live-list.js keeps a list of runs current without a reload. The list
// (an element with data-poll="<seconds>") holds rows with stable IDs and a
// data-state; every few seconds the page is fetched again and each row
// whose state moved is replaced by its new version, so the list's polite
// live region reads out only what changed. It stops once the fresh list no
// longer asks to be polled (every run has ended) or the page is gone (the
// session ended). Without JavaScript the list is simply the page's.
(function () {
  "use strict";
  const list = document.querySelector("[data-poll]");
  if (!list || !list.dataset.poll) return;
  const every = Math.max(1, Number(list.dataset.poll)) * 1000;

  async function refresh() {
    if (document.hidden) {
      // Nobody is looking: ask again later rather than load the server.
      setTimeout(refresh, every);
      return;
    }
    let fresh = null;
    try {
      const res = await fetch(location.pathname + location.search, { credentials: "same-origin", redirect: "manual" });
      if (res.ok) {
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        fresh = doc.getElementById(list.id);
      }
    } catch (_) {
      // Offline for a moment: try again at the next tick.
      setTimeout(refresh, every);
      return;
    }
    if (!fresh) return;
    fresh.querySelectorAll("li[id][data-state]").forEach(function (row) {
      const old = document.getElementById(row.id);
      if (old && old.dataset.state !== row.dataset.state) {
        old.replaceWith(document.importNode(row, true));
      }
    });
    if (fresh.dataset.poll) setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
