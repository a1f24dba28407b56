// apply.js: applies the run page's stream messages once each.
//
// Delivery is at least once (a reconnect may replay what was already
// shown), and htmx-ext-sse's re-created EventSource sends no Last-Event-ID.
// So the page keeps the last seq it applied in #run[data-applied-seq]:
//   - a message whose id is not above it is dropped before htmx swaps it;
//   - after the swap the applied seq moves on, and the sse-connect URL's
//     after= is rewritten so a re-created EventSource resumes right there;
//   - "reset" (a fresh snapshot) and "close" are always applied.
// It also shows whether the page is live or reconnecting, or why the server
// refused the stream for now ("busy": it retries after the server's hint).
(function () {
  'use strict';

  function runEl() { return document.getElementById('run'); }

  function applied(run) {
    var n = parseInt(run.getAttribute('data-applied-seq'), 10);
    return isNaN(n) ? 0 : n;
  }

  function setApplied(run, seq) {
    run.setAttribute('data-applied-seq', String(seq));
    var connect = run.getAttribute('sse-connect');
    if (connect) {
      var url = new URL(connect, window.location.href);
      url.searchParams.set('after', String(seq));
      run.setAttribute('sse-connect', url.pathname + url.search);
    }
  }

  function indicate(state, text) {
    var el = document.getElementById('stream-indicator');
    if (!el || el.getAttribute('data-state') === 'closed') return;
    // A refused stream's words stay until a stream opens again.
    if (state === 'reconnecting' && el.getAttribute('data-state') === 'busy') return;
    el.setAttribute('data-state', state);
    el.textContent = text;
  }

  function seqOf(msg) {
    var n = parseInt(msg.lastEventId, 10);
    return isNaN(n) ? null : n;
  }

  document.addEventListener('htmx:sseBeforeMessage', function (e) {
    var run = runEl();
    var msg = e.detail;
    if (!run || !msg || msg.type !== 'message') return;
    var seq = seqOf(msg);
    if (seq === null || seq <= applied(run)) {
      e.preventDefault(); // seen already: applying it again would repeat text
    }
  });

  document.addEventListener('htmx:sseMessage', function (e) {
    var run = runEl();
    var msg = e.detail;
    if (!run || !msg) return;
    if (msg.type === 'message' || msg.type === 'reset') {
      var seq = seqOf(msg);
      if (seq !== null) setApplied(run, seq);
    }
    if (msg.type === 'reset') {
      var body = document.getElementById('run-body');
      if (body) run.setAttribute('data-covering-seq', body.getAttribute('data-covering-seq'));
    }
  });

  document.addEventListener('htmx:sseOpen', function () { indicate('live', 'Live'); });
  document.addEventListener('htmx:sseError', function () { indicate('reconnecting', 'Reconnecting…'); });
  document.addEventListener('htmx:sseClose', function () {
    var status = document.getElementById('run-status');
    var state = status ? status.getAttribute('data-state') : '';
    var finished = state === 'completed' || state === 'failed' || state === 'canceled';
    indicate('closed', finished ? 'Final' : 'Not live');
  });
})();
