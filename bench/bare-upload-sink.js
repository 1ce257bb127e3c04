'use strict';
// The baseline of the upload bench: the least work that stores an upload for good. A bare
// node:http server in its own process (as the services are) takes the same multipart POST and
// writes its body, as it comes and unparsed, to a file in BENCH_SINK_DIR (on the same disk as
// system-files' storage), syncs it to disk before closing it, and answers 201. No framework, no
// parsing, no hashing, no database: what the product does beyond this is what the ratio prices.
//
//   POST   /uploads/<name>   body -> <dir>/<name> (exclusive create, fsync), 201 {"name","size"}
//   DELETE /uploads/<name>   removes it, 204 (the product run deletes each file too)
//
// The parent (bench/benches/upload.js) forks this file; the port chosen is sent back over IPC.
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { pipeline } = require('node:stream/promises');

const dir = process.env.BENCH_SINK_DIR;
if (!dir) throw new Error('BENCH_SINK_DIR is required');
fs.mkdirSync(dir, { recursive: true });

function answer(res, status, body) {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(text)) });
  res.end(text);
}

const server = http.createServer((req, res) => {
  const match = /^\/uploads\/([A-Za-z0-9][A-Za-z0-9._-]*)$/.exec(req.url ?? '');
  if (!match) {
    res.setHeader('Connection', 'close');
    return answer(res, 404, { error: 'not found' });
  }
  const file = path.join(dir, match[1]);
  if (req.method === 'DELETE') {
    fs.unlink(file, (err) => answer(res, err ? 404 : 204));
    return;
  }
  if (req.method !== 'POST') {
    res.setHeader('Connection', 'close');
    return answer(res, 405, { error: 'method not allowed' });
  }
  // flush: fsync(2) on the stream's own descriptor before it closes, so 201 means on disk.
  const sink = fs.createWriteStream(file, { flags: 'wx', flush: true });
  pipeline(req, sink).then(
    () => answer(res, 201, { name: match[1], size: sink.bytesWritten }),
    (err) => {
      if (err.code !== 'EEXIST') fs.rm(file, { force: true }, () => undefined);
      res.setHeader('Connection', 'close');
      answer(res, 500, { error: err.message });
    },
  );
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: server.address().port });
});

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.on('disconnect', shutdown);
