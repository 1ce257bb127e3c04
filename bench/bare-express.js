'use strict';
// The baseline: a bare express 5 app with one JSON route and nothing else (default settings,
// no middleware). It runs in its own process, like the gateway, so both servers pay for their
// own event loop and the load generator's process is the same for both.
//
// The parent (bench/lib/bare.js) forks this file and passes the body to serve in BENCH_BODY
// (JSON text); the route answers GET /v1/account with it. The port chosen is sent back over IPC.
const express = require('express');

const body = JSON.parse(process.env.BENCH_BODY ?? '{"ok":true}');
const app = express();
app.get('/v1/account', (req, res) => {
  res.json(body);
});

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
