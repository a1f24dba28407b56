// live.js: applies every page stream's messages once each: the run page's,
// the approval queue's and a customer's run list.
//
// A stream's element carries sse-connect and data-applied, the last id it
// applied (a run's seq, a queue's or list's version, or a request's family
// cursor: each of its runs' seqs, joined by dots). Delivery is at least
// once (a reconnect may replay what was already shown), and htmx-ext-sse's
// re-created EventSource sends no Last-Event-ID. So:
//   - a message whose id is not above data-applied is dropped before htmx
//     swaps it (a family cursor is above when any of its parts is: each
//     message moves one run's part);
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

  // cursorOf reads an id: one seq or version, or a family cursor's seqs;
  // null when it is none.
  function cursorOf(text) {
    if (!text || !/^\d+(\.\d+)*$/.test(text)) return null;
    return text.split('.').map(function (p) { return parseInt(p, 10); });
  }

  function applied(root) {
    return cursorOf(root.getAttribute('data-applied')) || [0];
  }

  // above: the id names something not yet applied.
  function above(id, done) {
    if (id.length !== done.length) return true;
    for (var i = 0; i < id.length; i++) {
      if (id[i] > done[i]) return true;
    }
    return false;
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
    return cursorOf(msg.lastEventId) ? msg.lastEventId : null;
  }

  document.addEventListener('htmx:sseBeforeMessage', function (e) {
    var root = rootOf(e);
    var msg = e.detail;
    if (!root || !msg || msg.type !== 'message') return;
    var id = idOf(msg);
    if (id === null || !above(cursorOf(id), applied(root))) {
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

  // A decision being typed survives the stream. A message may draw the
  // decision forms again (the run changed) or take them away (someone else
  // decided). Before the swap the open forms and their reasons are noted;
  // after it, a form drawn again is reopened with its reason, and one that
  // is gone leaves its reason beside the words that say who decided, to
  // copy. A form the viewer sent is not noted: its reason went with it.
  var typed = [];

  function noteTyped() {
    typed = [];
    document.querySelectorAll('details.confirm form').forEach(function (form) {
      var input = form.querySelector('input[name="reason"]');
      var details = form.closest('details');
      if (!input || form.getAttribute('data-sent') || (!details.open && !input.value)) return;
      var card = form.closest('.queue-item');
      if (typed.some(function (t) { return t.id === input.id; })) return;
      typed.push({ id: input.id, details: details.id, value: input.value, card: card ? card.id : '' });
    });
  }

  function keepTyped() {
    typed.forEach(function (t) {
      var input = document.getElementById(t.id);
      if (input) {
        if (!input.value) input.value = t.value;
        var d = input.closest('details');
        if (d) d.open = true;
        return;
      }
      keptReason(t);
    });
    typed = [];
  }

  // decidedWords are the page's own words for the decision that took the
  // form away: the queue's note for that card, or the run's latest
  // decision on its timeline.
  function decidedWords(t) {
    if (t.card) {
      var li = document.querySelector('#queue-decided li[data-card="' + t.card + '"]');
      return li ? li : null;
    }
    var items = document.querySelectorAll('#timeline li[data-type="approval.granted"], #timeline li[data-type="cancel.requested"]');
    return items.length ? items[items.length - 1] : null;
  }

  function keptReason(t) {
    var where = decidedWords(t);
    var box = document.createElement('div');
    box.className = 'kept-reason';
    if (!(t.card && where)) {
      // On the run page the decision is said again beside the reason; the
      // queue's note already says it.
      var said = document.createElement('p');
      var words = where ? where.cloneNode(true) : null;
      if (words) words.querySelectorAll('time').forEach(function (x) { x.remove(); });
      said.textContent = 'Decided by someone else while you were deciding: ' +
        (words ? words.textContent.trim() : 'the run no longer waits for a decision.');
      box.setAttribute('role', 'status');
      box.appendChild(said);
    } else if (!t.value) {
      return;
    }
    if (t.value) {
      var label = document.createElement('label');
      label.textContent = 'Your reason, not sent:';
      var text = document.createElement('textarea');
      text.readOnly = true;
      text.value = t.value;
      label.appendChild(text);
      box.appendChild(label);
    }
    if (t.card && where) {
      where.appendChild(box);
      return;
    }
    var run = document.getElementById('run-body');
    if (run) run.parentNode.insertBefore(box, run);
  }

  document.addEventListener('submit', function (e) {
    if (e.target instanceof Element) e.target.setAttribute('data-sent', '1');
  }, true);
  document.addEventListener('htmx:sseBeforeMessage', function (e) { if (!e.defaultPrevented) noteTyped(); });
  document.addEventListener('htmx:sseMessage', keepTyped);
  // The queue's word of others' decisions keeps the latest few: an
  // approver who leaves the page open all day gets no endless list.
  document.addEventListener('htmx:sseMessage', function () {
    var list = document.getElementById('queue-decided');
    while (list && list.children.length > 10) list.removeChild(list.firstElementChild);
  });

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

  // The step timer (#step-timer) counts how long the current step has
  // waited, from the start the server gave (data-since) and the server's
  // own now when it rendered it (data-now), so a browser whose clock is off
  // still counts right. It asks the server nothing: a new step comes with
  // the stream's next fragment.
  function elapsed(s) {
    s = Math.max(0, Math.floor(s));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }
  var seen = new WeakMap(); // when this page first showed each timer
  function tick() {
    var el = document.getElementById('step-timer');
    if (!el) return;
    var since = parseInt(el.getAttribute('data-since'), 10);
    var now = parseInt(el.getAttribute('data-now'), 10);
    if (isNaN(since) || isNaN(now)) return;
    if (!seen.has(el)) seen.set(el, Date.now());
    el.textContent = elapsed((now - since + Date.now() - seen.get(el)) / 1000);
  }
  setInterval(tick, 1000);

  // A queue card whose decision becomes due soon while the page is open
  // (data-soon-in: milliseconds after the server drew it) is marked then,
  // as the server marks it when it draws a card already due soon.
  var drawn = new WeakMap(); // when this page first showed each card
  function dueSoon() {
    document.querySelectorAll('[data-soon-in]').forEach(function (card) {
      var soonIn = parseInt(card.getAttribute('data-soon-in'), 10);
      if (isNaN(soonIn)) return;
      if (!drawn.has(card)) drawn.set(card, Date.now());
      if (Date.now() - drawn.get(card) < soonIn) return;
      card.classList.add('due-soon');
      card.removeAttribute('data-soon-in');
      var mark = card.querySelector('.due-soon-mark');
      if (mark) mark.hidden = false;
    });
  }
  setInterval(dueSoon, 1000);
})();
