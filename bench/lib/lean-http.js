'use strict';
// A keep-alive HTTP/1.1 client that does as little per request as a load generator can: one
// socket write of the whole request, the answer's status, headers and body read straight off
// the socket (Content-Length or chunked), no agent, no request or response objects. The bench
// process shares the machine's cores with the fleet it measures, and node:http's client costs
// several times this per request (the same reason autocannon and wrk write their own).
// One request at a time per connection (no pipelining).
const net = require('node:net');

const CRLFCRLF = Buffer.from('\r\n\r\n');

/** One keep-alive connection; `send` resolves with { status, headers, body } or rejects. */
class LeanConnection {
  constructor(host, port) {
    this.host = host;
    this.port = port;
    this.socket = null;
    this.waiting = null;
    this.chunks = [];
    this.length = 0;
  }

  send(requestText) {
    if (this.waiting) return Promise.reject(new Error('a request is already in flight on this connection'));
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      if (!this.socket) this.connect();
      this.socket.write(requestText);
    });
  }

  close() {
    this.socket?.destroy();
    this.socket = null;
  }

  connect() {
    const socket = net.connect({ host: this.host, port: this.port, noDelay: true });
    this.socket = socket;
    this.chunks = [];
    this.length = 0;
    socket.on('data', (chunk) => this.onData(chunk));
    // Only the current socket's end fails the request in flight: one this client closed itself
    // (after an answer with Connection: close) may report its end after the next request began.
    const gone = (err) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.fail(err ?? new Error('connection closed before the answer'));
    };
    socket.on('error', gone);
    socket.on('close', () => gone());
  }

  fail(err) {
    const w = this.waiting;
    this.waiting = null;
    w?.reject(err);
  }

  onData(chunk) {
    this.chunks.push(chunk);
    this.length += chunk.length;
    const data = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks, this.length);
    const answer = parseAnswer(data);
    if (!answer) {
      this.chunks = [data];
      return;
    }
    this.chunks = [];
    this.length = 0;
    if (answer.rest > 0) {
      // Bytes after a whole answer with no request pending: the connection is out of step.
      this.close();
      this.fail(new Error('unexpected bytes after an answer'));
      return;
    }
    if (answer.close) this.close();
    const w = this.waiting;
    this.waiting = null;
    w?.resolve({ status: answer.status, headers: answer.headers, body: answer.body });
  }
}

/** A whole answer at the start of `data`, or null while more bytes are needed. */
function parseAnswer(data) {
  const headEnd = data.indexOf(CRLFCRLF);
  if (headEnd < 0) return null;
  const lines = data.toString('latin1', 0, headEnd).split('\r\n');
  const status = Number(lines[0].split(' ')[1]);
  const headers = {};
  for (let i = 1; i < lines.length; i++) {
    const colon = lines[i].indexOf(':');
    if (colon > 0) headers[lines[i].slice(0, colon).trim().toLowerCase()] = lines[i].slice(colon + 1).trim();
  }
  const bodyStart = headEnd + 4;
  const close = (headers.connection ?? '').toLowerCase() === 'close';
  if (headers['content-length'] !== undefined) {
    const end = bodyStart + Number(headers['content-length']);
    if (data.length < end) return null;
    return { status, headers, body: data.toString('utf8', bodyStart, end), rest: data.length - end, close };
  }
  if ((headers['transfer-encoding'] ?? '').toLowerCase() === 'chunked') {
    const parts = [];
    let at = bodyStart;
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at, 'latin1');
      if (lineEnd < 0) return null;
      const size = parseInt(data.toString('latin1', at, lineEnd), 16);
      const chunkEnd = lineEnd + 2 + size;
      if (data.length < chunkEnd + 2) return null;
      if (size === 0) {
        // No trailers expected: the last chunk's line is followed by an empty line.
        return { status, headers, body: Buffer.concat(parts).toString('utf8'), rest: data.length - (chunkEnd + 2), close };
      }
      parts.push(data.subarray(lineEnd + 2, chunkEnd));
      at = chunkEnd + 2;
    }
  }
  // Neither length nor chunks (a 204 or 304, which have no body): what has arrived is the answer,
  // and the connection is closed since nothing tells where a body would end.
  return { status, headers, body: data.toString('utf8', bodyStart), rest: 0, close: true };
}

/**
 * `size` keep-alive connections to `baseUrl`. `request(method, path, headers, body)` resolves
 * with { status, headers, body } (body as text); requests beyond `size` in flight wait for a
 * free connection.
 */
function leanHttpClient(baseUrl, size) {
  const url = new URL(baseUrl);
  const host = url.hostname;
  const port = Number(url.port || 80);
  const free = Array.from({ length: size }, () => new LeanConnection(host, port));
  const all = [...free];
  const queue = [];
  const release = (conn) => {
    const next = queue.shift();
    if (next) next(conn);
    else free.push(conn);
  };
  const acquire = () => (free.length ? Promise.resolve(free.pop()) : new Promise((resolve) => queue.push(resolve)));
  return {
    async request(method, path, headers, body = '') {
      let text = `${method} ${path} HTTP/1.1\r\nhost: ${url.host}\r\n`;
      for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
      text += `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const conn = await acquire();
      try {
        return await conn.send(text);
      } finally {
        release(conn);
      }
    },
    close() {
      for (const conn of all) conn.close();
    },
  };
}

module.exports = { leanHttpClient };
