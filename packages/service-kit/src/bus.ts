import { connect, JSONCodec, type NatsConnection, type Subscription, ErrorCode, type NatsError } from 'nats';
import CircuitBreaker from 'opossum';
import {
  checkEvent,
  checkReplyEnvelope,
  checkRequestEnvelope,
  type EventSubject,
  type ReplyEnvelope,
  type RequestEnvelope,
} from '@fleet/contracts';
import { ApiError, ServiceUnavailableError, toEnvelopeError } from './errors';
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
  timeoutMs?: number;
}

/**
 * The fleet's NATS bus: request handlers in queue groups (so replicas share load), envelope
 * validation on both sides, and requests that fail fast with 503 when the owner is down,
 * slow or failing (a timeout per request plus one circuit breaker per subject).
 */
export class Bus {
  private readonly breakers = new Map<string, CircuitBreaker<[string, Uint8Array, number], Uint8Array>>();
  private readonly subscriptions: Subscription[] = [];

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
    let requestId = 'unknown';
    const log = this.options.logger.child({ subject });
    try {
      const envelope = checkRequestEnvelope(codec.decode(data));
      requestId = envelope.request_id;
      const result = await handler(envelope, { logger: log.child({ request_id: requestId }) });
      const reply: ReplyEnvelope = { ok: true, status: result.status ?? 200 };
      if (result.headers) reply.headers = result.headers;
      if (result.body !== undefined) reply.body = result.body;
      return checkReplyEnvelope(reply);
    } catch (err) {
      if (!(err instanceof ApiError)) log.error({ err, request_id: requestId }, 'handler failed');
      return { ok: false, error: toEnvelopeError(err) };
    }
  }

  /**
   * Sends a request envelope and returns the validated reply. A missing responder, a
   * timeout, an open breaker or a malformed reply all surface as ServiceUnavailableError.
   */
  async request(subject: string, envelope: RequestEnvelope, options: RequestOptions = {}): Promise<ReplyEnvelope> {
    const timeout = options.timeoutMs ?? this.options.requestTimeoutMs;
    checkRequestEnvelope(envelope);
    let raw: Uint8Array;
    try {
      raw = await this.breakerFor(subject).fire(subject, codec.encode(envelope), timeout);
    } catch (err) {
      this.options.logger.warn({ subject, err: describeBusError(err), request_id: envelope.request_id }, 'bus request failed');
      throw new ServiceUnavailableError();
    }
    try {
      return checkReplyEnvelope(codec.decode(raw));
    } catch (err) {
      this.options.logger.error({ subject, err, request_id: envelope.request_id }, 'malformed reply');
      throw new ServiceUnavailableError();
    }
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

function describeBusError(err: unknown): string {
  const code = (err as NatsError | undefined)?.code;
  if (code === ErrorCode.NoResponders) return 'no responders';
  if (code === ErrorCode.Timeout) return 'timeout';
  if ((err as { code?: string } | undefined)?.code === 'EOPENBREAKER') return 'circuit open';
  return err instanceof Error ? err.message : String(err);
}
