/**
 * The live stream (GET /v1/events): the gateway asks `events.stream.open`, which checks the
 * request and the partner's open streams (leases in the database, so the limit holds across
 * replicas) and answers a one-time URL of this replica's stream server; the gateway then relays
 * what that URL streams. The stream reads PARTNER_EVENTS with a consumer of its own from just
 * after Last-Event-ID (or from now), and writes each event the partner may receive (type
 * allowed by its permissions and grants as they are now, device in a granted subtree where it
 * was at the event's position in the stream, live or replayed: see access/device-places.ts; the
 * request's filters) as a Server-Sent Event whose id is the event's stream position. The events
 * received together (http/received-chunks.ts: never waiting for more) are judged together: one
 * look-up of places per chunk rather than one database round trip per event.
 *
 * A stream keeps pace with its reader. When the response's buffer is full (the partner, or the
 * gateway relaying to it, reads slowly: the gateway then stops reading this response), nothing
 * more is written until it drains, and the consumer is not asked for more meanwhile: it is read
 * one pull at a time, the next sent once the last is written and the response has drained. A
 * stream therefore holds at most one pull (PULL_MAX messages) beyond what its response and socket
 * buffers hold, however far behind its reader is or however old the position it replays from.
 * (An ordered consumer would not do: it pulls again as messages arrive, not as they are taken.)
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AckPolicy, DeliverPolicy, nanos, type ConsumerMessages, type JetStreamManager, type JsMsg, type NatsConnection } from 'nats';
import { inEnvelopeOrder, partnerEventTypeOf, type PartnerEventMessage, type Principal } from '@fleet/contracts';
import type { Logger } from '@fleet/service-kit';
import type { DevicePlaces, PositionedEvent } from '../access/device-places';
import type { PartnerAccessDirectory } from '../access/partner-access';
import { eventFor, mayReceive, receivableTypes } from '../domain/audience';
import { openStreams } from '../metrics';
import { SSE_RETRY, sseComment, sseEvent } from '../domain/sse';
import type { EventsDb } from '../store/prisma';
import { dropStreamLease, renewStreamLeases, takeStreamLease } from '../store/stream-leases';
import { receivedChunks } from './received-chunks';

export interface StreamRequest {
  partner: Principal;
  /** Types asked for; empty = every type the partner may receive. */
  types: string[];
  deviceId?: string;
  /** The stream position of the last event the client saw (Last-Event-ID). */
  after?: number;
}

/** Issues the one-time URL of a stream, or null when the partner holds its most open streams. */
export interface StreamTickets {
  issue(request: StreamRequest): Promise<string | null>;
}

export interface StreamServerOptions {
  nc: NatsConnection;
  db: EventsDb;
  access: PartnerAccessDirectory;
  places: DevicePlaces;
  stream: string;
  /** Subject prefix of tests that isolate themselves on a shared NATS server. */
  prefix?: string;
  maxPerPartner: number;
  keepAliveMs: number;
  /** Base URL the gateway reaches this server at; default http://<podAddress or 127.0.0.1>:<port>. */
  baseUrl?: string;
  podAddress?: string;
  logger: Logger;
}

/** How long a ticket waits for the gateway to come (it comes at once). */
const TICKET_TTL_MS = 30_000;
/** Leases are renewed well within their life: a replica that dies frees its partners' streams within a minute. */
const LEASE_TTL_MS = 60_000;
const LEASE_RENEW_MS = 20_000;
/**
 * Messages a stream's consumer pulls at a time, and the most judged together. A stream holds at
 * most one pull beyond what its response and socket buffers hold.
 */
const PULL_MAX = 256;
/** How long a pull waits for new events before the next one is sent (a live stream is one pull after another). */
const PULL_EXPIRES_MS = 30_000;
/**
 * A stream's consumer is deleted when the stream ends; the server deletes one left behind (a
 * replica that died) once no pull came for this long. A reader that stalls longer ends its stream.
 */
const CONSUMER_IDLE_MS = 5 * 60_000;

/** The chunk's partner events the stream asked for (type, device), in order; a message that is not one is skipped. */
function wanted(request: StreamRequest, messages: readonly JsMsg[]): Array<PositionedEvent & { type: string }> {
  return messages.flatMap((m) => {
    const type = partnerEventTypeOf(m.subject);
    if (!type || (request.types.length > 0 && !request.types.includes(type))) return [];
    let message: PartnerEventMessage;
    try {
      message = m.json<PartnerEventMessage>();
    } catch {
      return [];
    }
    if (request.deviceId && message.event.device_id !== request.deviceId) return [];
    return [{ seq: m.seq, message, type }];
  });
}

export class StreamServer implements StreamTickets {
  private server?: http.Server;
  private base = '';
  private readonly tickets = new Map<string, { request: StreamRequest; expires: number }>();
  private readonly open = new Map<string, () => void>();
  private renewTimer?: NodeJS.Timeout;

  constructor(private readonly options: StreamServerOptions) {}

  async listen(port: number, host: string): Promise<number> {
    const server = http.createServer((req, res) => void this.handle(req, res));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const bound = (server.address() as AddressInfo).port;
    const self = this.options.podAddress?.includes(':') ? `[${this.options.podAddress}]` : (this.options.podAddress ?? '127.0.0.1');
    this.base = (this.options.baseUrl ?? `http://${self}:${bound}`).replace(/\/$/, '');
    this.renewTimer = setInterval(() => {
      renewStreamLeases(this.options.db, [...this.open.keys()], LEASE_TTL_MS).catch((err: unknown) => this.options.logger.warn({ err }, 'could not renew stream leases'));
    }, LEASE_RENEW_MS);
    this.renewTimer.unref();
    return bound;
  }

  async issue(request: StreamRequest): Promise<string | null> {
    const id = randomUUID();
    if (!(await takeStreamLease(this.options.db, id, request.partner.partner_id, this.options.maxPerPartner, LEASE_TTL_MS))) return null;
    // A new stream starts where the stream stands now: nothing published after the request is missed.
    const after = request.after ?? (await (await this.options.nc.jetstreamManager()).streams.info(this.options.stream)).state.last_seq;
    this.tickets.set(id, { request: { ...request, after }, expires: Date.now() + TICKET_TTL_MS });
    setTimeout(() => {
      // Never redeemed: the lease goes too.
      if (this.tickets.delete(id)) void dropStreamLease(this.options.db, id).catch(() => undefined);
    }, TICKET_TTL_MS).unref();
    return `${this.base}/streams/${id}`;
  }

  /** Ends every open stream (clients reconnect to another replica with Last-Event-ID) and stops listening. */
  async close(): Promise<void> {
    clearInterval(this.renewTimer);
    for (const end of [...this.open.values()]) end();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const match = /^\/streams\/([0-9a-f-]{36})$/.exec(req.url ?? '');
    const ticket = match ? this.tickets.get(match[1] as string) : undefined;
    if (req.method !== 'GET' || !match || !ticket || ticket.expires < Date.now()) {
      // Unknown, used or expired: the gateway answers its partner 503 (retry), never this 404.
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'No such stream: its URL is unknown, used or expired.', code: 'not_found' }));
      return;
    }
    const id = match[1] as string;
    this.tickets.delete(id);
    await this.stream(id, ticket.request, req, res);
  }

  private async stream(id: string, request: StreamRequest, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { nc, stream, prefix = '', logger } = this.options;
    const log = logger.child({ stream_id: id, partner_id: request.partner.partner_id });
    let jsm: JetStreamManager | undefined;
    let messages: ConsumerMessages | undefined;
    let consumerName: string | undefined;
    let ended = false;
    /** Lets a wait for the response to drain go on when the stream ends meanwhile. */
    let wake: (() => void) | undefined;
    const end = (): void => {
      if (ended) return;
      ended = true;
      clearInterval(keepAlive);
      wake?.();
      this.open.delete(id);
      openStreams.set(this.open.size);
      void messages?.close().catch(() => undefined);
      if (jsm && consumerName) void jsm.consumers.delete(stream, consumerName).catch(() => undefined);
      void dropStreamLease(this.options.db, id).catch(() => undefined);
      res.end();
    };
    this.open.set(id, end);
    openStreams.set(this.open.size);
    req.on('close', end);
    res.on('error', end);
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(SSE_RETRY);
    // A full buffer needs no keep-alive: the reader has bytes to read, and one more would only queue.
    const keepAlive = setInterval(() => {
      if (!res.writableNeedDrain) res.write(sseComment('keep-alive'));
    }, this.options.keepAliveMs);
    keepAlive.unref();
    /** Resolves when the response can take more (it drained) or the stream ended. */
    const drained = (): Promise<void> =>
      ended || !res.writableNeedDrain
        ? Promise.resolve()
        : new Promise((resolve) => {
            const go = () => {
              res.off('drain', go);
              wake = undefined;
              resolve();
            };
            wake = go;
            res.on('drain', go);
          });
    /** The partner's access as it is now; undefined once it is disabled. */
    const accessNow = async () => (await this.options.access.accessOf([request.partner.partner_id])).get(request.partner.partner_id);
    try {
      // A consumer of this stream's own (no acknowledgements, in memory, deleted at the end),
      // read one pull at a time: the next pull is sent only once the last one's messages are
      // written and the response has drained.
      jsm = await nc.jetstreamManager({ checkAPI: false });
      const info = await jsm.consumers.add(stream, {
        ack_policy: AckPolicy.None,
        filter_subject: `${prefix}evt.partner.>`,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: (request.after ?? 0) + 1,
        mem_storage: true,
        num_replicas: 1,
        inactive_threshold: nanos(CONSUMER_IDLE_MS),
      });
      consumerName = info.name;
      if (ended) {
        await jsm.consumers.delete(stream, info.name).catch(() => undefined);
        return;
      }
      const consumer = await nc.jetstream().consumers.get(stream, info.name);
      /** The consumer's count of messages sent: a message it sent that never came (a reconnection) leaves a gap. */
      let sent = 0;
      while (!ended) {
        await drained();
        if (ended) break;
        messages = await consumer.fetch({ max_messages: PULL_MAX, expires: PULL_EXPIRES_MS });
        if (ended) {
          void messages.close().catch(() => undefined);
          break;
        }
        for await (const chunk of receivedChunks(messages, PULL_MAX)) {
          if (ended) break;
          for (const m of chunk) {
            // Nothing is skipped silently: the stream ends and the client resumes after what it got.
            if (m.info.deliverySequence !== ++sent) throw new Error(`the stream's consumer skipped messages (got ${m.info.deliverySequence}, expected ${sent})`);
          }
          const asked = wanted(request, chunk);
          if (asked.length === 0) continue;
          const judged = await accessNow();
          // A partner disabled meanwhile: the stream ends.
          if (!judged) {
            end();
            break;
          }
          // Permissions as they are now (cheap, first); then each device's place as it was at its
          // event's own position, for the whole chunk in one look-up.
          const permitted = asked.filter((e) => receivableTypes(judged, [e.type]).length > 0);
          if (permitted.length === 0) continue;
          const places = await this.options.places.placesOf(permitted);
          if (ended) break;
          let access: typeof judged | undefined = judged;
          for (const [i, e] of permitted.entries()) {
            if (!mayReceive(access, e.type, places[i])) continue;
            if (res.write(sseEvent(e.seq, e.type, JSON.stringify(inEnvelopeOrder(eventFor(access, e.message.event, places[i])))))) continue;
            // The reader is slower than the events: nothing more is written until the response
            // drains (nor pulled: the next pull waits for this one to be written). The rest of
            // the chunk is then written with the partner's access as it is by then.
            await drained();
            if (ended) break;
            if (i < permitted.length - 1) access = await accessNow();
            if (!access) {
              end();
              break;
            }
          }
          if (ended) break;
        }
      }
    } catch (err) {
      if (!ended) log.warn({ err }, 'live stream failed; the client resumes with Last-Event-ID');
    } finally {
      end();
    }
  }
}
