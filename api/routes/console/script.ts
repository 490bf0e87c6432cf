// The console's one script, served as /console/console.js under the page's
// CSP nonce. It opens /console/live (same origin; the session cookie goes
// with it), says which page it shows, and swaps in the live part the server
// renders whenever something on it changes. It reconnects with backoff and
// shows its state; without it the pages still work (reload to refresh).
export const CONSOLE_SCRIPT = `'use strict';
(function () {
  var live = document.getElementById('live');
  var status = document.getElementById('live-status');
  function localTimes() {
    document.querySelectorAll('time[datetime]').forEach(function (t) {
      t.title = new Date(t.getAttribute('datetime')).toLocaleString() + ' (your time)';
    });
  }
  localTimes();
  if (!live || !('WebSocket' in window)) return;
  var delay = 500;
  function say(text) { if (status) status.textContent = text; }
  function connect() {
    var ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/console/live');
    ws.addEventListener('open', function () {
      delay = 500;
      say('live');
      ws.send(JSON.stringify({ type: 'watch', path: location.pathname + location.search }));
    });
    ws.addEventListener('message', function (event) {
      var message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      if (message.type === 'live' && typeof message.html === 'string') {
        live.innerHTML = message.html;
        live.setAttribute('data-updated', message.at || '');
        localTimes();
      }
    });
    ws.addEventListener('close', function (event) {
      if (event.code === 4401) { say('signed out'); location.reload(); return; }
      if (event.code === 4404) { say('not live'); return; }
      say('reconnecting…');
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    });
  }
  connect();
})();
`;
