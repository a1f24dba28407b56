// queue.js: applies the approval queue's stream messages once each.
//
// Each message's id is the queue version it brings the page to, and it
// holds the change from the version before it. The page keeps the version
// it shows in #approval-queue[data-applied-version]:
//   - a change whose version is not above it is dropped before htmx swaps
//     it (a reconnect may send it again);
//   - after a swap the version moves on, and the sse-connect URL's after= is
//     rewritten, so an EventSource that htmx-ext-sse re-creates (it sends no
//     Last-Event-ID) resumes from the version shown;
//   - "reset" (the page as it is now) and "close" are always applied.
// It also shows whether the queue is live or reconnecting.
(function () {
  'use strict';

  function queueEl() { return document.getElementById('approval-queue'); }

  function ours(e) {
    var q = queueEl();
    return q && e.target instanceof Node && q.contains(e.target) ? q : null;
  }

  function applied(q) {
    var n = parseInt(q.getAttribute('data-applied-version'), 10);
    return isNaN(n) ? 0 : n;
  }

  function versionOf(msg) {
    var n = parseInt(msg.lastEventId, 10);
    return isNaN(n) ? null : n;
  }

  function setApplied(q, version) {
    q.setAttribute('data-applied-version', String(version));
    var connect = q.getAttribute('sse-connect');
    if (connect) {
      var url = new URL(connect, window.location.href);
      url.searchParams.set('after', String(version));
      q.setAttribute('sse-connect', url.pathname + url.search);
    }
  }

  function indicate(state, text) {
    var el = document.getElementById('queue-indicator');
    if (!el || el.getAttribute('data-state') === 'closed') return;
    el.setAttribute('data-state', state);
    el.textContent = text;
  }

  document.addEventListener('htmx:sseBeforeMessage', function (e) {
    var q = ours(e);
    var msg = e.detail;
    if (!q || !msg || msg.type !== 'message') return;
    var v = versionOf(msg);
    if (v === null || v <= applied(q)) e.preventDefault();
  });

  document.addEventListener('htmx:sseMessage', function (e) {
    var q = ours(e);
    var msg = e.detail;
    if (!q || !msg || (msg.type !== 'message' && msg.type !== 'reset')) return;
    var v = versionOf(msg);
    if (v !== null) setApplied(q, v);
  });

  document.addEventListener('htmx:sseOpen', function (e) { if (ours(e)) indicate('live', 'Live'); });
  document.addEventListener('htmx:sseError', function (e) { if (ours(e)) indicate('reconnecting', 'Reconnecting…'); });
})();
