// tabs-worker.js: one SharedWorker per browser holds ONE event stream,
// GET /streams?run=ID:AFTER&…, for the run pages of all its tabs, so ten
// tabs over HTTP/1.1 use one of the browser's six connections per origin.
//
// Each tab (tabs.js) asks to watch a run from a cursor; the worker keeps
// one cursor per run (the lowest any tab asked for, then the last seq it
// delivered), reconnects with the new set when it changes, and hands every
// message (id "RUN:SEQ") to the tabs watching RUN. A tab still drops what
// it applied already (live.js), so a reconnect that replays is harmless.
'use strict';

var watchers = {};   // key "port#id" -> {port, id, run}
var cursors = {};    // run -> last seq delivered (or asked for)
var source = null;   // the EventSource, when open or opening
var dirty = false;   // the source lacks a run, or a tab needs an older cursor
var nextPort = 0;
var timer = null;
var backoff = 0;
var holdUntil = 0;    // a refusal's retry hint (the busy event's data-retry)

function runs() {
  var set = {};
  Object.keys(watchers).forEach(function (k) { set[watchers[k].run] = true; });
  return Object.keys(set).sort();
}

function toTabs(run, msg) {
  Object.keys(watchers).forEach(function (k) {
    var w = watchers[k];
    if (run === null || w.run === run) {
      msg.id = w.id;
      w.port.postMessage(msg);
    }
  });
}

// reconnect soon: several tabs opening at once make one connection.
function reconnect(delay) {
  if (timer) clearTimeout(timer);
  timer = setTimeout(connect, delay);
}

function connect() {
  timer = null;
  if (source && !dirty) return;
  dirty = false;
  if (source) { source.close(); source = null; }
  var set = runs();
  if (set.length === 0) return;
  var url = '/streams?' + set.map(function (r) {
    return 'run=' + encodeURIComponent(r + ':' + cursors[r]);
  }).join('&');
  var es = new EventSource(url, { withCredentials: true });
  source = es;
  es.onopen = function () { backoff = 0; toTabs(null, { kind: 'open' }); };
  es.onerror = function () {
    if (source !== es) return;
    toTabs(null, { kind: 'error' });
    // Come back ourselves, with the cursors we have now: the browser's own
    // reconnect would go to the URL as it was opened, whose cursors may be
    // long past (and pruned). Not sooner than a refusal asked.
    es.close();
    source = null;
    dirty = true;
    // Jittered, so that the browsers of a server that went away do not
    // all come back at once.
    backoff = Math.min(Math.max(backoff * 2, 1000), 64000);
    reconnect(Math.max(backoff * (0.5 + Math.random()), holdUntil - Date.now()));
  };
  ['message', 'reset', 'close', 'busy', 'restart'].forEach(function (type) {
    es.addEventListener(type, function (e) { deliver(es, type, e); });
  });
}

function deliver(es, type, e) {
  if (es !== source) return;
  var id = e.lastEventId || '';
  var i = id.indexOf(':');
  var run = i >= 0 ? id.slice(0, i) : null;
  var seq = i >= 0 ? id.slice(i + 1) : '';
  if (run !== null && seq !== '' && (type === 'message' || type === 'reset')) {
    cursors[run] = seq;
  }
  if (type === 'busy') {
    var m = /data-retry="(\d+)"/.exec(e.data);
    if (m) holdUntil = Date.now() + Number(m[1]);
  }
  if (type === 'restart') {
    // The server is going away: come back in 0.4–2.7 s (the server's own
    // hints by default: STREAM_RETRY, STREAM_RETRY_SPREAD), not all at once.
    holdUntil = Date.now() + 400 + Math.random() * 2300;
  }
  toTabs(run, { kind: 'event', type: type, data: e.data, lastEventId: seq });
  if (type === 'close' && run !== null) {
    // This run's stream is over; the others go on. Its tabs close their
    // side, which leaves the run out of the next connection.
    delete cursors[run];
  }
}

// forget drops the runs no tab watches any more from the next connection.
function forget() {
  var watched = {};
  runs().forEach(function (r) { watched[r] = true; });
  Object.keys(cursors).forEach(function (r) {
    if (!watched[r]) { delete cursors[r]; dirty = true; }
  });
  if (dirty) reconnect(50);
}

onconnect = function (e) {
  var port = e.ports[0];
  var p = nextPort++;
  port.onmessage = function (m) {
    var d = m.data;
    var key = p + '#' + d.id;
    if (d.op === 'watch') {
      var known = d.run in cursors;
      watchers[key] = { port: port, id: d.id, run: d.run };
      if (!known || Number(d.after) < Number(cursors[d.run])) {
        // A new run, or a tab whose page is older than what was sent:
        // reconnect from its cursor (the others drop what they have).
        cursors[d.run] = d.after;
        dirty = true;
        reconnect(50);
      } else if (source && source.readyState === EventSource.OPEN) {
        port.postMessage({ kind: 'open', id: d.id });
      }
    } else if (d.op === 'unwatch') {
      delete watchers[key];
      forget();
    } else if (d.op === 'bye') {
      Object.keys(watchers).forEach(function (k) { if (k.indexOf(p + '#') === 0) delete watchers[k]; });
      forget();
    }
  };
  port.start();
};
