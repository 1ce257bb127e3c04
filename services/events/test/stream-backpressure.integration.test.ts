/**
 * The live stream's pace against real NATS (JetStream) and Postgres: a stream whose reader stops
 * reading stops writing and pulling until the reader drains it, then goes on with nothing missed;
 * the partner's access is asked again before what was held back is written; keep-alives come on
 * an idle stream. The gateway's `gateway.partner.access` and the registry are stood in for.
 */
import http from 'node:http';
import { newPartnerEvent, partnerEventSubject, type PartnerEventType, type Permission, type Principal } from '@fleet/contracts';
import { RegistryClient } from '@fleet/registry-client';
import { Bus, ensureStream, eventStreamPlan, PARTNER_EVENTS_STREAM, publishDurable } from '@fleet/service-kit';
import { randomDeviceId, RegistryStandIn, waitFor } from '@fleet/test-kit';
import { DevicePlaces } from '../src/access/device-places';
import { PartnerAccessDirectory } from '../src/access/partner-access';
import { StreamServer } from '../src/http/stream-server';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb, serveGatewayAccess, type PartnerAccessTable } from './support';

/** Events of 10 KB: a few hundred of them fill what the sockets between the stream and its reader hold. */
const LINE = 'x'.repeat(10_000);
const BURST = 3000;

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let registry: RegistryStandIn;
let server: StreamServer;
let chatty: StreamServer;
/** What gateway.partner.access answers, by partner id. */
const partners: PartnerAccessTable = new Map();
const readers: http.ClientRequest[] = [];

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  registry = new RegistryStandIn(bus.connection);
  serveGatewayAccess(bus.connection, partners);
  await ensureStream(await bus.connection.jetstreamManager(), eventStreamPlan(PARTNER_EVENTS_STREAM), logger);
  const timeouts = { cacheMs: 0, timeoutMs: 2000 };
  const access = new PartnerAccessDirectory(bus, timeouts);
  const places = new DevicePlaces(new RegistryClient(bus, { timeoutMs: 2000, logger }), testDb.db, timeouts);
  server = new StreamServer({ nc: bus.connection, db: testDb.db, access, places, stream: PARTNER_EVENTS_STREAM, maxPerPartner: 5, keepAliveMs: 60_000, logger });
  await server.listen(0, '127.0.0.1');
  chatty = new StreamServer({ nc: bus.connection, db: testDb.db, access, places, stream: PARTNER_EVENTS_STREAM, maxPerPartner: 5, keepAliveMs: 100, logger });
  await chatty.listen(0, '127.0.0.1');
});

afterEach(() => {
  for (const r of readers.splice(0)) r.destroy();
});

afterAll(async () => {
  await server?.close();
  await chatty?.close();
  registry?.close();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

function partner(permissions: Permission[], orgGrants: number[] = []): Principal {
  const p = principal({ permissions: [...permissions, 'events_read'], org_grants: orgGrants });
  partners.set(p.partner_id, { permissions: p.permissions, org_grants: orgGrants });
  return p;
}

function device(path: number[]): string {
  const id = randomDeviceId();
  const node = path[path.length - 1] as number;
  registry.described.set(id, { device_id: id, product: 'light', name: null, org_node: { id: node, parent_id: path[path.length - 2] ?? null, name: `n${node}` }, automation_enabled: true });
  registry.orgPaths.set(node, path);
  return id;
}

async function publish(type: PartnerEventType, deviceId: string, data: Record<string, unknown>): Promise<string> {
  const message = newPartnerEvent(type, { deviceId, data });
  await publishDurable(bus.connection, partnerEventSubject(type), message);
  return message.event.id;
}

const lastPosition = async () => (await (await bus.connection.jetstreamManager()).streams.info(PARTNER_EVENTS_STREAM)).state.last_seq;

/** The furthest position the stream's consumers have been sent by the server (the fan-out does not run here). */
async function pulledUpTo(): Promise<number> {
  const consumers = await (await bus.connection.jetstreamManager()).consumers.list(PARTNER_EVENTS_STREAM).next();
  return Math.max(0, ...consumers.map((c) => c.delivered.stream_seq));
}

/** GETs a stream's URL without reading it: its answer waits in the sockets until read() is called. */
async function openPaused(url: string) {
  const events: Array<{ id: number; type: string; data: { id: string } }> = [];
  let text = '';
  let buffer = '';
  let ended = false;
  const request = http.get(url);
  readers.push(request);
  const response = await new Promise<http.IncomingMessage>((resolve) => request.on('response', resolve));
  response.pause();
  response.setEncoding('utf8');
  response.on('end', () => (ended = true));
  const onData = (chunk: string) => {
    text += chunk;
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields = Object.fromEntries(frame.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]));
      if (fields.id && fields.data) events.push({ id: Number(fields.id), type: fields.event as string, data: JSON.parse(fields.data as string) });
    }
  };
  return {
    events,
    status: response.statusCode,
    get text() {
      return text;
    },
    get ended() {
      return ended;
    },
    read: () => response.on('data', onData).resume(),
  };
}

describe('a reader slower than its events', () => {
  it('holds the stream back: nothing more is written or pulled until the reader drains it, then every event follows in order', async () => {
    const p = partner(['system_read'], [1]);
    const d = device([1, 2]);
    const after = await lastPosition();
    const stream = await openPaused((await server.issue({ partner: p, types: [], after }))!);
    expect(stream.status).toBe(200);
    const published: string[] = [];
    for (let i = 0; i < BURST; i++) published.push(await publish('system.log_received', d, { line: LINE }));
    await waitFor(async () => (await pulledUpTo()) > after, { what: 'the stream reading' });
    // What the sockets between the two hold, plus one pull, is far less than the burst: the rest
    // is still in PARTNER_EVENTS, not in the events service.
    expect((await pulledUpTo()) - after).toBeLessThan(BURST / 2);

    stream.read();
    await waitFor(() => stream.events.length === BURST, { timeoutMs: 20_000, what: 'the whole burst, once read' });
    expect(stream.events.map((e) => e.data.id)).toEqual(published);
    expect(stream.events.map((e) => e.id)).toEqual(published.map((_, i) => after + 1 + i));
    // Live again: a new event comes at once.
    const live = await publish('system.log_received', d, { line: 'live' });
    await waitFor(() => stream.events.some((e) => e.data.id === live), { what: 'a live event after the burst' });
  }, 60_000);

  it('asks the partner’s access again before writing what it held back: a partner disabled meanwhile gets no more', async () => {
    const p = partner(['system_read'], [1]);
    const d = device([1, 3]);
    const after = await lastPosition();
    const stream = await openPaused((await server.issue({ partner: p, types: [], after }))!);
    for (let i = 0; i < BURST; i++) await publish('system.log_received', d, { line: LINE });
    await waitFor(async () => (await pulledUpTo()) > after, { what: 'the stream reading' });
    partners.delete(p.partner_id);
    stream.read();
    await waitFor(() => stream.ended, { timeoutMs: 20_000, what: 'the stream ended' });
    expect(stream.events.length).toBeLessThan(BURST / 2);
  }, 60_000);
});

it('writes a keep-alive comment on an idle stream', async () => {
  const p = partner(['system_read'], [1]);
  const stream = await openPaused((await chatty.issue({ partner: p, types: [], after: await lastPosition() }))!);
  stream.read();
  await waitFor(() => stream.text.split(': keep-alive\n\n').length > 2, { what: 'two keep-alives' });
  expect(stream.events).toEqual([]);
});
