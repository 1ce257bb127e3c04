'use strict';
// The baseline: a bare express 5 app with one JSON route and nothing else (default settings,
// no middleware). It runs in its own process, like the gateway, so both servers pay for their
// own event loop and the load generator's process is the same for both.
//
// The parent (bench/lib/proc.js) forks this file and passes what to serve: BENCH_BODY (JSON
// text), answered on GET /v1/account, or BENCH_BODIES_FILE, a JSON file of { path: body } for
// answers too large for the environment (each path answers its body). The port chosen is sent
// back over IPC.
const fs = require('node:fs');
const express = require('express');

const app = express();
if (process.env.BENCH_BODIES_FILE) {
  for (const [route, routeBody] of Object.entries(JSON.parse(fs.readFileSync(process.env.BENCH_BODIES_FILE, 'utf8')))) {
    app.get(route, (req, res) => {
      res.json(routeBody);
    });
  }
} else {
  const body = JSON.parse(process.env.BENCH_BODY ?? '{"ok":true}');
  app.get('/v1/account', (req, res) => {
    res.json(body);
  });
}

const server = app.listen(0, '127.0.0.1', () => {
  process.send?.({ port: server.address().port });
});
server.keepAliveTimeout = 65_000;

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.on('disconnect', shutdown);
