import { connect, createInbox, JSONCodec, type NatsConnection, type Subscription, ErrorCode, type NatsError } from 'nats';
import CircuitBreaker from 'opossum';
import {
  checkEvent,
  checkReplyEnvelope,
  checkRequestEnvelope,
  type EventSubject,
  type ReplyEnvelope,
  type RequestEnvelope,
} from '@fleet/contracts';
import { ApiError, DeadlineExceededError, ServiceUnavailableError, isDeadlineExceeded, isStoreOutage, toEnvelopeError } from './errors';
import type { Logger } from './logger';

const codec = JSONCodec<unknown>();

/** What a handler answers on success; thrown ApiErrors become error replies. */
export interface HandlerResult {
  status?: number;
  body?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export interface HandlerContext {
  logger: Logger;
  /**
   * When the caller stops waiting for the outcome (epoch milliseconds): the envelope's
   * `deadline`, or this service's own bus timeout from the request's arrival when the sender
   * set none. Work for the request must not commit after it (packages/db `transactionBy`), and
   * requests made on its behalf pass it on (`bus.request(..., { deadline })`).
   */
  deadline: number;
  /** Milliseconds left until the deadline; 0 once it has passed. */
  remainingMs(): number;
  /**
   * To be awaited right before the COMMIT of work for the request (packages/db `transactionBy`
   * does): tells a caller that asked for it (the envelope's `commit_notice`) that the work may be
   * stored from now on, so it waits for the outcome instead of answering that nothing happened.
   * Resolves once the bus server has the notice.
   */
  beforeCommit(): Promise<void>;
}

export type RequestHandler = (request: RequestEnvelope, ctx: HandlerContext) => Promise<HandlerResult>;

export interface BusOptions {
  servers: string;
  /** Service name: the connection name and the queue group of its handlers. */
  service: string;
  logger: Logger;
  requestTimeoutMs: number;
}

export interface RequestOptions {
  /** The longest this request may take; default: the bus's requestTimeoutMs. */
  timeoutMs?: number;
  /**
   * The deadline of the request this one is made for (HandlerContext.deadline): the new request
   * gets the earlier of it and now + timeoutMs, never more time than its parent has left.
   */
  deadline?: number;
  /**
   * How long to keep waiting for the reply after the deadline. Work that committed just before
   * the deadline is then still reported, instead of being answered as a 503 that did happen.
   * Default 0.
   */
  outcomeGraceMs?: number;
  /**
   * For requests that may store something: the replier is asked for a commit notice (the
   * envelope's `commit_notice`), and once one arrived the reply is awaited until the deadline plus
   * commitWaitMs (when larger than the grace). A replier that stalls between its COMMIT and its
   * reply then still gets its outcome reported; without a notice by the deadline plus the grace,
   * nothing can have been committed and the request fails as before. Default 0: no notice.
   */
  commitWaitMs?: number;
}

/** The replier's answer to a request that arrived after its deadline: it was not run. */
const arrivedTooLate = () => new ServiceUnavailableError('The request could not be taken up in time; nothing was done. Retry shortly.');

/**
 * The fleet's NATS bus: request handlers in queue groups (so replicas share load), envelope
 * validation on both sides, and requests that fail fast with 503 when the owner is down,
 * slow or failing (a timeout per request plus one circuit breaker per subject).
 *
 * Every request carries a deadline (epoch milliseconds, the envelope's `deadline`): the
 * moment its caller stops waiting. A handler whose request arrives after it is not run (503),
 * the handler sees it in its context, and requests it makes on the request's behalf inherit
 * what is left of it.
 */
export class Bus {
  private readonly breakers = new Map<string, CircuitBreaker<[string, Uint8Array, number], Uint8Array>>();
  private readonly subscriptions: Subscription[] = [];
  /** Commit notices of requests in flight, by notice subject (see RequestOptions.commitWaitMs). */
  private readonly noticesAwaited = new Map<string, () => void>();
  private noticePrefix: string | undefined;
  private noticeCount = 0;

  private constructor(
    readonly connection: NatsConnection,
    private readonly options: BusOptions,
  ) {}

  static async connect(options: BusOptions): Promise<Bus> {
    const connection = await connect({
      servers: options.servers,
      name: options.service,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
    });
    const bus = new Bus(connection, options);
    void bus.watchStatus();
    return bus;
  }

  get isConnected(): boolean {
    return !this.connection.isClosed() && !this.connection.isDraining();
  }

  private async watchStatus(): Promise<void> {
    for await (const status of this.connection.status()) {
      this.options.logger.info({ nats: status.type }, 'bus connection status');
    }
  }

  /** Serves a request subject; every replica of the service joins the same queue group. */
  serve(subject: string, handler: RequestHandler): void {
    const { logger, service } = this.options;
    const sub = this.connection.subscribe(subject, {
      queue: service,
      callback: (err, msg) => {
        if (err) {
          logger.error({ err, subject }, 'subscription failed');
          return;
        }
        void this.handle(subject, handler, msg.data).then((reply) => msg.respond(codec.encode(reply)));
      },
    });
    this.subscriptions.push(sub);
  }

  private async handle(subject: string, handler: RequestHandler, data: Uint8Array): Promise<ReplyEnvelope> {
    const arrived = Date.now();
    let log = this.options.logger.child({ subject });
    try {
      const envelope = checkRequestEnvelope(codec.decode(data));
      log = log.child({ request_id: envelope.request_id });
      // A sender that set no deadline (a hand-made envelope) gets this service's own timeout.
      envelope.deadline ??= arrived + this.options.requestTimeoutMs;
      const deadline = envelope.deadline;
      if (arrived >= deadline) {
        log.warn({ late_ms: arrived - deadline }, 'request arrived after its deadline; not run');
        throw arrivedTooLate();
      }
      const notice = envelope.commit_notice;
      const beforeCommit = async (): Promise<void> => {
        if (notice === undefined || this.connection.isClosed()) return;
        this.connection.publish(notice);
        // The bus server has the notice before the COMMIT is sent: a caller never misses the notice of work that committed.
        await this.connection.flush();
      };
      const result = await handler(envelope, { logger: log, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit });
      const reply: ReplyEnvelope = { ok: true, status: result.status ?? 200 };
      if (result.headers) reply.headers = result.headers;
      if (result.body !== undefined) reply.body = result.body;
      return checkReplyEnvelope(reply);
    } catch (err) {
      if (isDeadlineExceeded(err)) log.warn({ err }, 'deadline passed before the work was stored');
      else if (isStoreOutage(err)) log.warn({ err }, 'database unavailable');
      else if (!(err instanceof ApiError)) log.error({ err }, 'handler failed');
      // A deadline that passed before the work was stored (packages/db's commit guard) is a 503.
      return { ok: false, error: toEnvelopeError(isDeadlineExceeded(err) && !(err instanceof ApiError) ? new DeadlineExceededError() : err) };
    }
  }

  /**
   * Sends a request envelope with its deadline and returns the validated reply. The deadline is
   * the earliest of now + timeoutMs, options.deadline and a deadline the envelope already has;
   * the reply is awaited until the deadline plus options.outcomeGraceMs (longer once a commit
   * notice came, see options.commitWaitMs). A missing responder,
   * no reply by then, an open breaker, a deadline already passed or a malformed reply all
   * surface as ServiceUnavailableError.
   */
  async request(subject: string, envelope: RequestEnvelope, options: RequestOptions = {}): Promise<ReplyEnvelope> {
    const now = Date.now();
    const deadline = Math.floor(
      Math.min(now + (options.timeoutMs ?? this.options.requestTimeoutMs), options.deadline ?? Infinity, envelope.deadline ?? Infinity),
    );
    if (deadline <= now) {
      this.options.logger.warn({ subject, request_id: envelope.request_id, late_ms: now - deadline }, 'bus request not sent: its deadline has passed');
      throw new ServiceUnavailableError();
    }
    const graceMs = Math.max(0, options.outcomeGraceMs ?? 0);
    const commitWaitMs = Math.max(0, options.commitWaitMs ?? 0);
    const notice = commitWaitMs > graceMs ? this.awaitNotice() : undefined;
    const sent = checkRequestEnvelope({ ...envelope, deadline, ...(notice ? { commit_notice: notice.subject } : {}) });
    let raw: Uint8Array;
    try {
      const reply = this.breakerFor(subject).fire(subject, codec.encode(sent), deadline - now + (notice ? commitWaitMs : graceMs));
      raw = notice ? await replyUnlessUncommitted(reply, deadline + graceMs - Date.now(), notice.received) : await reply;
    } catch (err) {
      this.options.logger.warn({ subject, err: describeBusError(err), request_id: envelope.request_id }, 'bus request failed');
      throw new ServiceUnavailableError();
    } finally {
      if (notice) this.noticesAwaited.delete(notice.subject);
    }
    try {
      return checkReplyEnvelope(codec.decode(raw));
    } catch (err) {
      this.options.logger.error({ subject, err, request_id: envelope.request_id }, 'malformed reply');
      throw new ServiceUnavailableError();
    }
  }

  /** A fresh commit-notice subject for one request and whether its notice has come. */
  private awaitNotice(): { subject: string; received: () => boolean } {
    if (!this.noticePrefix) {
      const prefix = createInbox();
      this.subscriptions.push(this.connection.subscribe(`${prefix}.*`, { callback: (_err, msg) => this.noticesAwaited.get(msg.subject)?.() }));
      this.noticePrefix = prefix;
    }
    this.noticeCount += 1;
    const subject = `${this.noticePrefix}.${this.noticeCount}`;
    let received = false;
    this.noticesAwaited.set(subject, () => {
      received = true;
    });
    return { subject, received: () => received };
  }

  private breakerFor(subject: string): CircuitBreaker<[string, Uint8Array, number], Uint8Array> {
    let breaker = this.breakers.get(subject);
    if (!breaker) {
      breaker = new CircuitBreaker(
        async (s: string, payload: Uint8Array, timeout: number) => (await this.connection.request(s, payload, { timeout })).data,
        {
          // The request carries its own timeout; the breaker only counts failures.
          timeout: false,
          errorThresholdPercentage: 50,
          volumeThreshold: 10,
          rollingCountTimeout: 10_000,
          resetTimeout: 2_000,
        },
      );
      breaker.on('open', () => this.options.logger.warn({ subject }, 'circuit opened'));
      breaker.on('close', () => this.options.logger.info({ subject }, 'circuit closed'));
      this.breakers.set(subject, breaker);
    }
    return breaker;
  }

  /** Publishes an event after checking it against its schema. */
  publish<T>(subject: EventSubject, payload: T): void {
    checkEvent(subject, payload);
    this.connection.publish(subject, codec.encode(payload));
  }

  /** Subscribes to an event subject; every replica receives every event (no queue group). */
  subscribe<T>(subject: EventSubject, onEvent: (payload: T) => void): void {
    const sub = this.connection.subscribe(subject, {
      callback: (err, msg) => {
        if (err) return;
        try {
          onEvent(checkEvent<T>(subject, codec.decode(msg.data)));
        } catch (e) {
          this.options.logger.warn({ subject, err: e }, 'dropped malformed event');
        }
      },
    });
    this.subscriptions.push(sub);
  }

  /** Stops taking requests, lets in-flight handlers finish, then closes. */
  async drain(): Promise<void> {
    for (const breaker of this.breakers.values()) breaker.shutdown();
    if (!this.connection.isClosed()) await this.connection.drain();
  }
}

/**
 * The reply, unless no commit notice has come by the end of the grace (graceEndsInMs from now):
 * then nothing can have been committed and the wait ends with a timeout.
 */
function replyUnlessUncommitted(reply: Promise<Uint8Array>, graceEndsInMs: number, noticed: () => boolean): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => {
        if (!noticed()) reject(Object.assign(new Error('no reply and no commit notice by the deadline'), { code: ErrorCode.Timeout }));
      },
      Math.max(0, graceEndsInMs),
    );
    reply.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

function describeBusError(err: unknown): string {
  const code = (err as NatsError | undefined)?.code;
  if (code === ErrorCode.NoResponders) return 'no responders';
  if (code === ErrorCode.Timeout) return 'timeout';
  if ((err as { code?: string } | undefined)?.code === 'EOPENBREAKER') return 'circuit open';
  return err instanceof Error ? err.message : String(err);
}
