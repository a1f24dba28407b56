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

  // The words this script writes, in the page's language: the layout puts
  // them on the body (data-live-words, views.liveWords, from the
  // catalogues), so they have one home. A word missing shows its key.
  var words = {};
  try {
    words = JSON.parse(document.body.getAttribute('data-live-words') || '{}');
  } catch (e) { /* keys */ }
  ['live', 'final', 'not_live', 'reconnecting', 'held_reconnecting', 'held_closed', 'status',
    'decided_elsewhere', 'no_longer_waits', 'reason_not_sent', 'elapsed.s', 'elapsed.m', 'elapsed.h']
    .forEach(function (k) { if (typeof words[k] !== 'string') words[k] = k; });

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
      say(words.status + state);
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

  // A decision being made survives the stream. A message may draw the
  // decision forms again (the run changed, or only something beside them)
  // or take them away (someone else decided). Before the message is
  // swapped, every confirmation the viewer opened or typed a reason into is
  // noted. A region the message draws exactly as it stands is not swapped
  // at all; one drawn differently arrives already open, with the reason in
  // it, so htmx puts the cursor back where it was (it can only focus what
  // is shown). A form that is gone leaves its reason beside the words that
  // say who decided, to copy. A form the viewer sent is not noted: its
  // reason went with it.
  var typed = [];

  // keyOf names a confirmation across redraws: its own id (run and request
  // pages), else its reason field's (a queue card's).
  function keyOf(details) {
    if (details.id) return '#' + details.id;
    var input = details.querySelector('input[name="reason"]');
    return input && input.id ? 'input#' + input.id : '';
  }

  function confirmIn(scope, key) {
    var el;
    try { el = scope.querySelector(key); } catch (err) { return null; }
    return el ? (el.tagName === 'DETAILS' ? el : el.closest('details.confirm')) : null;
  }

  function noteTyped() {
    typed = [];
    document.querySelectorAll('details.confirm').forEach(function (details) {
      var form = details.querySelector('form');
      var input = details.querySelector('input[name="reason"]');
      var key = keyOf(details);
      if (!key || !form || form.getAttribute('data-sent') || (!details.open && !(input && input.value))) return;
      if (typed.some(function (t) { return t.key === key; })) return;
      var card = details.closest('.queue-item');
      typed.push({ key: key, id: input ? input.id : '', open: details.open, value: input ? input.value : '', card: card ? card.id : '' });
    });
  }

  // same: the region would be drawn as it stands (what the viewer opened
  // or typed aside).
  function same(target, fragment) {
    var now = target.cloneNode(true);
    now.querySelectorAll('details[open]').forEach(function (d) { d.removeAttribute('open'); });
    now.querySelectorAll('[aria-disabled], .actions-offline').forEach(function (x) {
      if (x.classList.contains('actions-offline')) x.remove(); else x.removeAttribute('aria-disabled');
    });
    now.querySelectorAll('button[disabled]').forEach(function (b) { b.removeAttribute('disabled'); });
    var box = document.createElement('div');
    box.appendChild(fragment.cloneNode(true));
    return box.innerHTML === now.outerHTML;
  }

  document.addEventListener('htmx:oobBeforeSwap', function (e) {
    var d = e.detail;
    if (!typed.length || !d || !d.fragment || !(d.target instanceof Element)) return;
    var here = typed.filter(function (t) { return confirmIn(d.target, t.key); });
    if (!here.length) return;
    if (d.target.matches('.actions, .queue-actions') && same(d.target, d.fragment)) {
      d.shouldSwap = false; // nothing it shows changed: leave it be
      return;
    }
    here.forEach(function (t) {
      var details = confirmIn(d.fragment, t.key);
      if (!details) return;
      if (t.open) details.setAttribute('open', '');
      var input = t.id ? details.querySelector('input[name="reason"]') : null;
      if (input && !input.value) input.value = t.value;
    });
  });

  function keepTyped() {
    typed.forEach(function (t) {
      var details = confirmIn(document, t.key);
      if (details) {
        // Swapped some other way than a region of its own: the same again.
        if (t.open) details.open = true;
        var input = t.id ? details.querySelector('input[name="reason"]') : null;
        if (input && !input.value) input.value = t.value;
        return;
      }
      if (t.id) keptReason(t);
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
      var copy = where ? where.cloneNode(true) : null;
      if (copy) copy.querySelectorAll('time').forEach(function (x) { x.remove(); });
      said.textContent = words.decided_elsewhere +
        (copy ? copy.textContent.trim() : words.no_longer_waits);
      box.setAttribute('role', 'status');
      box.appendChild(said);
    } else if (!t.value) {
      return;
    }
    if (t.value) {
      var label = document.createElement('label');
      label.textContent = words.reason_not_sent;
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
    if (e.target instanceof Element && !heldRoot(e.target)) e.target.setAttribute('data-sent', '1');
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

  // Decisions are offered only while the page is live (or still opening
  // on the snapshot it was just rendered from). While its stream is cut,
  // what the page shows may be out of date: a decision taken on it could
  // contradict what already happened. So each confirmation's summary is
  // marked aria-disabled (and will not open), its button is disabled, and
  // the decisions say they wait; all comes back when the stream opens
  // again, before the messages it missed are applied.
  var heldWords = {
    reconnecting: words.held_reconnecting,
    closed: words.held_closed
  };

  // hold holds the root's decisions for why (a key of heldWords), or lets
  // them go ('').
  function hold(root, why) {
    if (why) root.setAttribute('data-held', why); else root.removeAttribute('data-held');
    holdDecisions(root);
  }

  function holdDecisions(root) {
    var why = root.getAttribute('data-held');
    var held = !!why;
    var boxes = [];
    root.querySelectorAll('details.confirm').forEach(function (d) {
      var s = d.querySelector('summary');
      if (s) {
        if (held) s.setAttribute('aria-disabled', 'true'); else s.removeAttribute('aria-disabled');
      }
      d.querySelectorAll('button[type="submit"], button:not([type])').forEach(function (b) {
        b.disabled = held;
        if (held) b.setAttribute('aria-disabled', 'true'); else b.removeAttribute('aria-disabled');
      });
      if (d.parentElement && boxes.indexOf(d.parentElement) < 0) boxes.push(d.parentElement);
    });
    root.querySelectorAll('.actions-offline').forEach(function (n) { n.remove(); });
    if (!held) return;
    boxes.forEach(function (box) {
      var note = document.createElement('p');
      note.className = 'actions-offline muted';
      note.textContent = heldWords[why] || heldWords.reconnecting;
      box.appendChild(note);
    });
  }

  function heldRoot(el) {
    var root = el instanceof Element ? el.closest('[data-applied]') : null;
    return root && root.hasAttribute('data-held') ? root : null;
  }

  // A held confirmation does not open, and its form is not sent (Enter in
  // the reason field included).
  document.addEventListener('click', function (e) {
    var s = e.target instanceof Element ? e.target.closest('details.confirm > summary') : null;
    if (s && heldRoot(s) && !s.parentElement.open) e.preventDefault();
  }, true);
  document.addEventListener('submit', function (e) {
    if (heldRoot(e.target)) { e.preventDefault(); e.stopPropagation(); }
  }, true);
  document.addEventListener('htmx:sseMessage', function (e) {
    var root = rootOf(e);
    if (root && root.hasAttribute('data-held')) holdDecisions(root);
  });

  document.addEventListener('htmx:sseOpen', function (e) {
    var root = rootOf(e);
    if (!root) return;
    hold(root, '');
    indicate('live', words.live);
  });
  document.addEventListener('htmx:sseError', function (e) {
    var root = rootOf(e);
    if (!root) return;
    hold(root, 'reconnecting');
    indicate('reconnecting', words.reconnecting);
  });
  document.addEventListener('htmx:sseClose', function (e) {
    var root = rootOf(e);
    if (!root) return;
    hold(root, 'closed');
    var status = document.getElementById('run-status');
    var state = status ? status.getAttribute('data-state') : '';
    var finished = state === 'completed' || state === 'failed' || state === 'canceled';
    indicate('closed', finished ? words.final : words.not_live);
  });

  // The step timer (#step-timer) counts how long the current step has
  // waited, from the start the server gave (data-since) and the server's
  // own now when it rendered it (data-now), so a browser whose clock is off
  // still counts right. It asks the server nothing: a new step comes with
  // the stream's next fragment.
  function elapsed(s) {
    s = Math.max(0, Math.floor(s));
    var fill = function (w, h, m, sec) { return w.replace('{h}', h).replace('{m}', m).replace('{s}', sec); };
    if (s < 60) return fill(words['elapsed.s'], 0, 0, s);
    if (s < 3600) return fill(words['elapsed.m'], 0, Math.floor(s / 60), s % 60);
    return fill(words['elapsed.h'], Math.floor(s / 3600), Math.floor((s % 3600) / 60), 0);
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
