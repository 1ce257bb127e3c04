import { Writable } from 'node:stream';
import { testSubject } from '@fleet/test-kit';
import { Bus, createLogger, currentWork, formatTraceparent, parseTraceparent, startHop, withWork } from '@fleet/service-kit';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

describe('traceparent', () => {
  it('reads W3C version-00 headers and refuses malformed or all-zero ids', () => {
    const header = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(parseTraceparent(header)).toEqual({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', sampled: true });
    expect(formatTraceparent(parseTraceparent(header)!)).toBe(header);
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00')?.sampled).toBe(false);
    for (const bad of [undefined, '', 'x', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`, '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01']) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });

  it('continues a parent’s trace with a new span, or starts a trace', () => {
    const parent = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')!;
    const child = startHop('x', 'server', parent).context;
    expect(child.traceId).toBe(parent.traceId);
    expect(child.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(child.spanId).not.toBe(parent.spanId);
    const root = startHop('x', 'server').context;
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(root.traceId).not.toBe(startHop('x', 'server').context.traceId);
  });
});

describe('work context', () => {
  it('puts request_id and trace_id on every log line written during the work, and what a call passes wins', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const logger = createLogger('trace-test', 'info', undefined, sink);
    const trace = startHop('x', 'server').context;
    logger.info('before');
    await withWork({ trace, requestId: 'req_1' }, async () => {
      await new Promise((r) => setTimeout(r, 5));
      logger.child({ component: 'c' }).info('during, after an await');
      logger.info({ request_id: 'req_explicit' }, 'explicit');
      expect(currentWork()).toEqual({ trace, requestId: 'req_1' });
    });
    logger.info('after');
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.msg, l.request_id, l.trace_id])).toEqual([
      ['before', undefined, undefined],
      ['during, after an await', 'req_1', trace.traceId],
      ['explicit', 'req_explicit', trace.traceId],
      ['after', undefined, undefined],
    ]);
  });
});

describe('the bus carries the trace', () => {
  it('hands the caller’s trace to the handler, which serves under a span of it, and back to requests it makes', async () => {
    const a = await Bus.connect({ servers: NATS_URL, service: 'trace-a', logger: createLogger('trace-a', 'silent'), requestTimeoutMs: 1000 });
    const b = await Bus.connect({ servers: NATS_URL, service: 'trace-b', logger: createLogger('trace-b', 'silent'), requestTimeoutMs: 1000 });
    try {
      const first = testSubject(`trace.${process.pid}.first`);
      const second = testSubject(`trace.${process.pid}.second`);
      const seen: Array<{ at: string; traceId?: string; spanId?: string; requestId?: string }> = [];
      b.serve(second, async () => {
        const w = currentWork();
        seen.push({ at: 'second', traceId: w?.trace.traceId, spanId: w?.trace.spanId, requestId: w?.requestId });
        return { body: {} };
      });
      a.serve(first, async () => {
        const w = currentWork();
        seen.push({ at: 'first', traceId: w?.trace.traceId, spanId: w?.trace.spanId, requestId: w?.requestId });
        await a.request(second, { request_id: 'req_inner', params: {}, query: {} });
        return { body: {} };
      });
      await a.connection.flush();
      await b.connection.flush();
      const caller = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')!;
      await withWork({ trace: caller, requestId: 'req_outer' }, () => b.request(first, { request_id: 'req_outer', params: {}, query: {} }));
      expect(seen.map((s) => [s.at, s.traceId, s.requestId])).toEqual([
        ['first', caller.traceId, 'req_outer'],
        ['second', caller.traceId, 'req_inner'],
      ]);
      expect(new Set([caller.spanId, ...seen.map((s) => s.spanId)]).size).toBe(3);
      // A request made outside any work starts a trace of its own at the handler.
      await b.request(second, { request_id: 'req_lone', params: {}, query: {} });
      expect(seen.at(-1)?.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(seen.at(-1)?.traceId).not.toBe(caller.traceId);
    } finally {
      await a.drain();
      await b.drain();
    }
  });
});
