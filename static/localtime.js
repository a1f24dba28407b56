// localtime.js: shows every <time datetime> in the viewer's own time zone,
// with the zone named. The server writes UTC (pages without scripts, tests
// and copies stay exact); here each time is written again as the browser's
// zone reads it, in the page's language (<html lang>), at the precision
// the server chose (seconds and milliseconds only where it showed them).
// Times that arrive later (live streams, swaps) are rewritten as they are
// added.
(function () {
  'use strict';

  function local(el) {
    var iso = el.getAttribute('datetime');
    var d = new Date(iso);
    if (!iso || isNaN(d.getTime()) || el.getAttribute('data-local') === iso) return;
    var shown = el.textContent;
    var opts = { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit',
      hourCycle: 'h23', timeZoneName: 'short' };
    if (/\d:\d\d:\d\d/.test(shown)) opts.second = '2-digit';
    if (/\d:\d\d:\d\d\.\d{3}/.test(shown)) opts.fractionalSecondDigits = 3;
    el.textContent = new Intl.DateTimeFormat(document.documentElement.lang || undefined, opts).format(d);
    el.setAttribute('title', iso);
    el.setAttribute('data-local', iso);
  }

  function all(root) {
    if (root.matches && root.matches('time[datetime]')) local(root);
    if (root.querySelectorAll) root.querySelectorAll('time[datetime]').forEach(local);
  }

  function start() {
    all(document);
    new MutationObserver(function (records) {
      records.forEach(function (r) { r.addedNodes.forEach(all); });
    }).observe(document.body, { childList: true, subtree: true });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
