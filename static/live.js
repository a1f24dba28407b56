// live.js: applies every page stream's messages once each: the run page's,
// the approval queue's and a customer's run list.
//
// A stream's element carries sse-connect and data-applied, the last id it
// applied (a run's seq, a queue's or list's version). Delivery is at least
// once (a reconnect may replay what was already shown), and htmx-ext-sse's
// re-created EventSource sends no Last-Event-ID. So:
//   - a message whose id is not above data-applied is dropped before htmx
//     swaps it;
//   - after the swap data-applied moves on, and the sse-connect URL's
//     after= is rewritten so a re-created EventSource resumes right there;
//   - "reset" (the state as it is now) and "close" are always applied.
// It also shows in #stream-indicator whether the page is live or
// reconnecting, or why the server refused the stream for now ("busy": it
// retries after the server's hint).
(function () {
  'use strict';

  function rootOf(e) {
    var t = e.target;
    if (!(t instanceof Element)) return null;
    return t.closest('[data-applied]');
  }

  function applied(root) {
    var n = parseInt(root.getAttribute('data-applied'), 10);
    return isNaN(n) ? 0 : n;
  }

  function setApplied(root, id) {
    root.setAttribute('data-applied', String(id));
    var connect = root.getAttribute('sse-connect');
    if (connect) {
      var url = new URL(connect, window.location.href);
      url.searchParams.set('after', String(id));
      root.setAttribute('sse-connect', url.pathname + url.search);
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

  function idOf(msg) {
    var n = parseInt(msg.lastEventId, 10);
    return isNaN(n) ? null : n;
  }

  document.addEventListener('htmx:sseBeforeMessage', function (e) {
    var root = rootOf(e);
    var msg = e.detail;
    if (!root || !msg || msg.type !== 'message') return;
    var id = idOf(msg);
    if (id === null || id <= applied(root)) {
      e.preventDefault(); // seen already: applying it again would repeat it
    }
  });

  document.addEventListener('htmx:sseMessage', function (e) {
    var root = rootOf(e);
    var msg = e.detail;
    if (!root || !msg) return;
    if (msg.type === 'message' || msg.type === 'reset') {
      var id = idOf(msg);
      if (id !== null) setApplied(root, id);
    }
    if (msg.type === 'reset' && root.hasAttribute('data-covering-seq')) {
      var body = root.querySelector('[data-covering-seq]');
      if (body) root.setAttribute('data-covering-seq', body.getAttribute('data-covering-seq'));
    }
  });

  // A screen reader hears, through #run-announcer: the status when it
  // changes, at once, and the narration added since it last heard, at most
  // once every data-throttle-ms. The connection speaks through the
  // indicator's own live region.
  var heard = { state: null, narrated: null, timer: null };

  function runState() {
    var el = document.getElementById('run-state');
    return el ? el.textContent.trim() : '';
  }

  function narrationText() {
    var el = document.getElementById('narration');
    return el ? el.textContent : '';
  }

  function say(text) {
    var el = document.getElementById('run-announcer');
    if (el && text) el.textContent = text;
  }

  function announce() {
    if (!document.getElementById('run-announcer')) return;
    if (heard.state === null) { heard.state = runState(); heard.narrated = narrationText(); }
    var state = runState();
    if (state && state !== heard.state) {
      heard.state = state;
      say('Status: ' + state);
    }
    if (heard.timer) return;
    var every = parseInt(document.getElementById('run-announcer').getAttribute('data-throttle-ms'), 10) || 8000;
    heard.timer = setTimeout(function () {
      heard.timer = null;
      var now = narrationText();
      // A restarted step or a reset starts the narration again.
      var added = now.indexOf(heard.narrated) === 0 ? now.slice(heard.narrated.length) : now;
      heard.narrated = now;
      added = added.trim();
      if (added) say(added.length > 400 ? '…' + added.slice(-400) : added);
    }, every);
  }

  document.addEventListener('DOMContentLoaded', announce);
  document.addEventListener('htmx:sseMessage', announce);

  document.addEventListener('htmx:sseOpen', function (e) { if (rootOf(e)) indicate('live', 'Live'); });
  document.addEventListener('htmx:sseError', function (e) { if (rootOf(e)) indicate('reconnecting', 'Reconnecting…'); });
  document.addEventListener('htmx:sseClose', function (e) {
    if (!rootOf(e)) return;
    var status = document.getElementById('run-status');
    var state = status ? status.getAttribute('data-state') : '';
    var finished = state === 'completed' || state === 'failed' || state === 'canceled';
    indicate('closed', finished ? 'Final' : 'Not live');
  });
})();
