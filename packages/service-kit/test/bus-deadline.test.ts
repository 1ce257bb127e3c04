import { JSONCodec } from 'nats';
import { testSubject } from '@fleet/test-kit';
import { Bus, DeadlineExceededError, createLogger, type HandlerContext } from '@fleet/service-kit';
import type { ReplyEnvelope, RequestEnvelope } from '@fleet/contracts';

// Request deadlines on the bus: set by the caller, refused when already passed on arrival,
// exposed to handlers, inherited by requests made on a request's behalf, and the grace a caller
// may wait past the deadline to learn the outcome.

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const logger = createLogger('bus-deadline-test', 'silent');
const unique = `d${process.pid}${Date.now().toString(36)}`;
const subject = (name: string) => testSubject(`${unique}.${name}`);
const envelope = (extra: Partial<RequestEnvelope> = {}): RequestEnvelope => ({ request_id: 'req-d', params: {}, query: {}, ...extra });
const codec = JSONCodec<unknown>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let server: Bus;
let client: Bus;

beforeAll(async () => {
  server = await Bus.connect({ servers: NATS_URL, service: `svc-${unique}`, logger, requestTimeoutMs: 400 });
  client = await Bus.connect({ servers: NATS_URL, service: `client-${unique}`, logger, requestTimeoutMs: 400 });
});
afterAll(async () => {
  await server.drain();
  await client.drain();
});

/** Serves a subject that records what its handler saw. */
async function recorder(name: string, answer: (req: RequestEnvelope, ctx: HandlerContext) => Promise<Record<string, unknown>> = async () => ({})) {
  const seen: Array<{ req: RequestEnvelope; deadline: number; remaining: number }> = [];
  const subject = testSubject(`${unique}.${name}`);
  server.serve(subject, async (req, ctx) => {
    seen.push({ req, deadline: ctx.deadline, remaining: ctx.remainingMs() });
    return { body: await answer(req, ctx) };
  });
  await server.connection.flush();
  return { subject, seen };
}

async function raw(subject: string, body: unknown): Promise<ReplyEnvelope> {
  const msg = await client.connection.request(subject, codec.encode(body), { timeout: 1000 });
  return codec.decode(msg.data) as ReplyEnvelope;
}

describe('request deadlines', () => {
  it('sends now + timeout as the deadline and shows it to the handler', async () => {
    const { subject, seen } = await recorder('stamp');
    const before = Date.now();
    // A budget a loaded machine cannot overrun (the test is about the stamp, not the timeout).
    const timeoutMs = 2000;
    const reply = await client.request(subject, envelope(), { timeoutMs });
    expect(reply.ok).toBe(true);
    const { req, deadline, remaining } = seen[0]!;
    expect(req.deadline).toBe(deadline);
    expect(deadline).toBeGreaterThanOrEqual(before + timeoutMs);
    expect(deadline).toBeLessThanOrEqual(Date.now() + timeoutMs);
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThanOrEqual(timeoutMs);
  });

  it('does not run a request that arrives after its deadline: 503, handler untouched', async () => {
    const { subject, seen } = await recorder('late');
    const reply = await raw(subject, envelope({ deadline: Date.now() - 1 }));
    expect(reply).toMatchObject({ ok: false, error: { status: 503, code: 'service_unavailable', retry_after: 1 } });
    expect(seen).toHaveLength(0);
  });

  it('gives a hand-made envelope without a deadline the service\'s own timeout from arrival', async () => {
    const { subject, seen } = await recorder('bare');
    const before = Date.now();
    expect((await raw(subject, envelope())).ok).toBe(true);
    expect(seen[0]!.deadline).toBeGreaterThanOrEqual(before + 400);
    expect(seen[0]!.deadline).toBeLessThanOrEqual(Date.now() + 400);
  });

  it('never gives a request made on a request\'s behalf more time than is left', async () => {
    const inner = await recorder('inner');
    const outer = await recorder('outer', async (_req, ctx) => {
      // Asks with a longer timeout of its own: the inherited deadline wins.
      await client.request(inner.subject, envelope(), { timeoutMs: 10_000, deadline: ctx.deadline });
      // And a shorter own timeout wins over the inherited deadline.
      const own = Date.now();
      await client.request(inner.subject, envelope(), { timeoutMs: 50, deadline: ctx.deadline });
      return { own };
    });
    const reply = await client.request(outer.subject, envelope(), { timeoutMs: 300 });
    expect(reply.ok).toBe(true);
    const outerDeadline = outer.seen[0]!.deadline;
    expect(inner.seen[0]!.deadline).toBe(outerDeadline);
    const own = (reply.ok && (reply.body as { own: number }).own) as number;
    expect(inner.seen[1]!.deadline).toBeGreaterThanOrEqual(own + 50);
    expect(inner.seen[1]!.deadline).toBeLessThan(outerDeadline);
  });

  it('keeps an earlier deadline the envelope already carries', async () => {
    const { subject, seen } = await recorder('carried');
    const deadline = Date.now() + 150;
    expect((await client.request(subject, envelope({ deadline }), { timeoutMs: 5_000 })).ok).toBe(true);
    expect(seen[0]!.deadline).toBe(deadline);
  });

  it('fails at once, sending nothing, when the deadline has already passed', async () => {
    const { subject, seen } = await recorder('spent');
    const started = Date.now();
    await expect(client.request(subject, envelope(), { deadline: Date.now() - 5 })).rejects.toMatchObject({ status: 503 });
    expect(Date.now() - started).toBeLessThan(50);
    await sleep(50);
    expect(seen).toHaveLength(0);
  });

  it('waits the outcome grace past the deadline for a reply, and no longer', async () => {
    // Answers 150 ms after its deadline (as a service whose work committed just before it would).
    const { subject } = await recorder('grace', async (_req, ctx) => {
      await sleep(ctx.remainingMs() + 150);
      return { done: true };
    });
    await expect(client.request(subject, envelope(), { timeoutMs: 200 })).rejects.toMatchObject({ status: 503 });
    const reply = await client.request(subject, envelope(), { timeoutMs: 200, outcomeGraceMs: 600 });
    expect(reply).toMatchObject({ ok: true, body: { done: true } });
    const started = Date.now();
    await expect(client.request(subject, envelope(), { timeoutMs: 100, outcomeGraceMs: 50 })).rejects.toMatchObject({ status: 503 });
    expect(Date.now() - started).toBeLessThan(250);
  });

  it('answers a deadline that passed before the work was stored as 503, nothing stored', async () => {
    const subjectA = subject('commit.a');
    const subjectB = subject('commit.b');
    // packages/db's CommitDeadlineError carries this code; the kit does not depend on packages/db.
    server.serve(subjectA, async () => {
      throw Object.assign(new Error('rolled back at COMMIT'), { code: 'deadline_exceeded' });
    });
    server.serve(subjectB, async () => {
      throw new DeadlineExceededError();
    });
    await server.connection.flush();
    for (const subject of [subjectA, subjectB]) {
      const reply = await client.request(subject, envelope());
      expect(reply).toMatchObject({ ok: false, error: { status: 503, code: 'service_unavailable', retry_after: 1 } });
      expect(reply.ok === false && reply.error.message).toMatch(/nothing was stored/);
    }
  });

  it('keeps waiting past the grace once the replier sent its commit notice, and only then', async () => {
    // Stalls 300 ms past the deadline, after (or without) the notice a handler sends right before its COMMIT.
    const { subject: committing, seen } = await recorder('notice', async (_req, ctx) => {
      await ctx.beforeCommit();
      await sleep(ctx.remainingMs() + 300);
      return { stored: true };
    });
    const { subject: silent } = await recorder('silent', async (_req, ctx) => {
      await sleep(ctx.remainingMs() + 300);
      return { stored: false };
    });
    const waits = { timeoutMs: 150, outcomeGraceMs: 50, commitWaitMs: 2_000 };
    const reply = await client.request(committing, envelope(), waits);
    expect(reply).toMatchObject({ ok: true, body: { stored: true } });
    expect(seen[0]?.req.commit_notice).toEqual(expect.any(String));

    const started = Date.now();
    await expect(client.request(silent, envelope(), waits)).rejects.toMatchObject({ status: 503 });
    expect(Date.now() - started).toBeLessThan(400);
    // Without commitWaitMs no notice is asked for, and a notice would change nothing.
    await expect(client.request(committing, envelope(), { timeoutMs: 150, outcomeGraceMs: 50 })).rejects.toMatchObject({ status: 503 });
    expect(seen[2]?.req.commit_notice).toBeUndefined();
  });
});
