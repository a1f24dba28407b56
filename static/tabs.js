// tabs.js: lets the run pages of one browser share one event stream.
//
// htmx-ext-sse builds its EventSource through htmx.createEventSource, which
// it only sets when nothing did before. This script sets it to a stand-in
// that a SharedWorker (tabs-worker.js) feeds from the browser's one
// connection to /streams, so a seventh run tab does not wait for one of
// the six HTTP/1.1 connections per origin. Without SharedWorker the
// extension's own EventSource is used.
(function () {
  'use strict';
  if (typeof SharedWorker === 'undefined' || typeof htmx === 'undefined') return;
  var script = document.currentScript;
  var worker;
  try {
    worker = new SharedWorker(script.getAttribute('data-worker'), { name: 'refundd-streams' });
  } catch (e) {
    return;
  }
  var port = worker.port;
  var sources = {};
  var nextID = 0;

  // TabSource is as much of EventSource as htmx-ext-sse uses.
  function TabSource(url) {
    var u = new URL(url, window.location.href);
    var m = u.pathname.match(/^\/runs\/([^/]+)\/events$/);
    this.url = u.href;
    this.withCredentials = true;
    this.readyState = 0;
    this.onopen = null;
    this.onerror = null;
    this.listeners = {};
    this.id = nextID++;
    sources[this.id] = this;
    port.postMessage({ op: 'watch', id: this.id, run: m ? m[1] : '', after: u.searchParams.get('after') || '0' });
  }
  TabSource.CONNECTING = 0; TabSource.OPEN = 1; TabSource.CLOSED = 2;
  TabSource.prototype.addEventListener = function (type, fn) {
    (this.listeners[type] = this.listeners[type] || []).push(fn);
  };
  TabSource.prototype.removeEventListener = function (type, fn) {
    var l = this.listeners[type] || [];
    var i = l.indexOf(fn);
    if (i >= 0) l.splice(i, 1);
  };
  TabSource.prototype.dispatchEvent = function (ev) {
    (this.listeners[ev.type] || []).slice().forEach(function (fn) { fn(ev); });
    return true;
  };
  TabSource.prototype.close = function () {
    if (this.readyState === 2) return;
    this.readyState = 2;
    delete sources[this.id];
    port.postMessage({ op: 'unwatch', id: this.id });
  };

  port.onmessage = function (m) {
    var d = m.data;
    var s = sources[d.id];
    if (!s) return;
    if (d.kind === 'open') {
      s.readyState = 1;
      if (s.onopen) s.onopen(new Event('open'));
    } else if (d.kind === 'error') {
      // Still connecting: the worker reconnects, so the extension must
      // not build a source of its own (it does only when CLOSED).
      s.readyState = 0;
      if (s.onerror) s.onerror(new Event('error'));
    } else {
      s.dispatchEvent(new MessageEvent(d.type, { data: d.data, lastEventId: d.lastEventId }));
    }
  };
  port.start();
  window.addEventListener('pagehide', function () { port.postMessage({ op: 'bye' }); });
  htmx.createEventSource = function (url) { return new TabSource(url); };
})();
