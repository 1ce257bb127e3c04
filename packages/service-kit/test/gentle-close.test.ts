/**
 * closeGently on a real server and a real socket: a client still sending its body when the
 * server answers `Connection: close` reads the answer and can go on writing for the grace
 * period, where node alone closes at once (a reset that can cost a busy client the answer).
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { closeGently } from '../src/gentle-close';

const GRACE_MS = 1500;

/** A server that answers 413 as soon as the request's headers are in, leaving the body unread. */
async function refusingServer(gentle: boolean): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (gentle) closeGently(req.socket, { graceMs: GRACE_MS, drain: false });
    res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
    res.end('{"code":"payload_too_large"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Sends headers for a large body, then keeps writing; resolves with what happened and when. */
function sendBody(port: number): Promise<{ answer: string; failedAfterAnswerMs: number | null; closedAfterAnswerMs: number }> {
  return new Promise((resolve) => {
    // Half-open: the client goes on sending after the server's FIN, as one mid-body does.
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let answer = '';
    let answeredAt = 0;
    let failedAt: number | null = null;
    const chunk = Buffer.alloc(16 * 1024, 1);
    const pump = () => {
      while (!socket.destroyed && socket.write(chunk));
    };
    socket.on('connect', () => {
      socket.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 1073741824\r\n\r\n');
      pump();
    });
    socket.on('drain', pump);
    socket.on('data', (data: Buffer) => {
      answer += data.toString('latin1');
      if (answeredAt === 0 && answer.includes('payload_too_large')) answeredAt = Date.now();
    });
    socket.on('error', () => {
      if (failedAt === null) failedAt = Date.now();
    });
    socket.on('close', () => {
      const since = (at: number) => at - (answeredAt || at);
      resolve({ answer, failedAfterAnswerMs: failedAt === null ? null : since(failedAt), closedAfterAnswerMs: since(Date.now()) });
    });
  });
}

it('keeps the connection open, unread, for the grace period after the answer, then closes it', async () => {
  const server = await refusingServer(true);
  try {
    const outcome = await sendBody(server.port);
    expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 [\s\S]*connection: close[\s\S]*payload_too_large/i);
    // Writing went on without an error well into the grace period: no reset came with the answer.
    expect(outcome.failedAfterAnswerMs === null || outcome.failedAfterAnswerMs > GRACE_MS / 2).toBe(true);
    expect(outcome.closedAfterAnswerMs).toBeGreaterThan(GRACE_MS / 2);
    expect(outcome.closedAfterAnswerMs).toBeLessThan(GRACE_MS + 5000);
  } finally {
    await server.close();
  }
});

it('without it, node resets the connection right after the answer while the body still arrives', async () => {
  const server = await refusingServer(false);
  try {
    const outcome = await sendBody(server.port);
    expect(outcome.failedAfterAnswerMs).not.toBeNull();
    expect(outcome.failedAfterAnswerMs!).toBeLessThan(GRACE_MS / 2);
  } finally {
    await server.close();
  }
});
