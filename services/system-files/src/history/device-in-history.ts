/**
 * Captured device traffic read back from the DEVICE_IN stream (the raw MQTT read, the status
 * feed). The bridge captures every message a device sent (`dev.in.*`) and every message sent to
 * one (`dev.out.*`) with its MQTT topic, receive time, QoS and retain flag as headers
 * (services/mqtt-bridge, src/domain/wire.ts); the stream's retention window bounds the history.
 *
 * A read names one or more subject filters (without the service's subject prefix), each read by
 * a short-lived consumer of its own that the server filters, merged in stream order: nats-server
 * 2.9 takes one filter per consumer, and only one inside a single stream subject (`dev.in.>` or
 * `dev.out.>`), so both directions are two filters. JetStream reads forward only, so the newest
 * messages are found by reading windows that reach further back each time (doubling) until
 * enough are found or the stream's start is reached. Every read stops at its `until` with what
 * it has, so a request never outlives its deadline.
 */
import { AckPolicy, DeliverPolicy, nanos, type JetStreamClient, type JetStreamManager, type JsMsg, type MsgHdrs, type NatsConnection, type NatsError } from 'nats';
import { parseCaptureSubject, type Direction } from '@fleet/device-protocol';
import { ApiError, ServiceUnavailableError, type HandlerContext } from '@fleet/service-kit';

/** One captured message. */
export interface CapturedMessage {
  /** Its DEVICE_IN stream sequence. */
  seq: number;
  /** The MQTT topic as it was on the broker. */
  topic: string;
  /** UTF-8 text; bytes that are not UTF-8 are replaced (U+FFFD). */
  payload: string;
  /** in: the device sent it; out: the platform sent it to the device. */
  direction: Direction;
  /** When the bridge took it (ISO 8601). */
  receivedAt: string;
  qos: number;
  retain: boolean;
}

export interface DeviceInHistoryOptions {
  /** The DEVICE_IN stream's name. */
  stream: string;
  /** The subject prefix of every DEVICE_IN subject (`SUBJECT_PREFIX`). */
  prefix: string;
  /** Messages asked of the server at once, per subject filter (default 200). */
  batch?: number;
  /** The first window a newest-first read looks back (default 1024 messages); doubled each time. */
  firstWindow?: number;
}

/** Which messages a read takes, and how much. */
export interface ReadLimits {
  /** Most messages returned. */
  limit: number;
  /** Epoch ms: the read stops there with what it has. */
  until: number;
  /** Only messages it accepts count (the subject filters are the server's coarse cut). */
  match?: (message: CapturedMessage) => boolean;
  /** The size a message adds to the answer; with maxWeight, bounds an answer (at least one message is returned). */
  weigh?: (message: CapturedMessage) => number;
  maxWeight?: number;
}

export interface NewestRead {
  /** Newest first. */
  messages: CapturedMessage[];
  /** The stream's last sequence when the read began: what follows it is newer than every message looked at. */
  lastSeq: number;
}

export interface ForwardRead {
  /** Oldest first. */
  messages: CapturedMessage[];
  /** The stream position read up to: the next read starts after it and skips nothing. */
  position: number;
  /** Whether messages on the subject filters wait after `position` (or time ran out before they were read). */
  hasMore: boolean;
}

/** Where a forward read starts: after a stream position, or at a time. */
export type ForwardStart = { afterSeq: number } | { atTime: Date };

interface StreamState {
  firstSeq: number;
  lastSeq: number;
  /** 0: no age limit. */
  maxAgeNanos: number;
}

/** What a scan does with a message: take it and go on (true), or stop before it (false). */
type Visit = (message: CapturedMessage) => boolean;

/** One subject filter of a scan: its consumer and the messages fetched but not yet visited. */
interface Source {
  consumer: string;
  /** The stream position before the first message the consumer delivers. */
  startedAfter: number;
  /** The last message fetched (startedAfter before the first). */
  lastSeen: number;
  buffer: CapturedMessage[];
  next: number;
  /** Messages on the filter after the last one fetched (as the server last said). */
  pending: number;
}

interface Scan {
  /** The stream position before the first message the scan could deliver. */
  startedAfter: number;
  /** The last message taken: every message up to it, on every filter, was visited. */
  lastTaken: number | undefined;
  /** Every message on the filters up to `upTo` was visited (the scan was not cut short). */
  complete: boolean;
  /** Messages on the filters after the last one taken (newer ones than `upTo` included). */
  remaining: number;
}

/** Where a scan starts, and the last stream position it looks at. */
interface Span {
  from: { seq: number } | { time: Date };
  /**
   * A stream sequence known before the scan's consumers were made: each of them knows of every
   * message up to it, so merging them in stream order up to there misses none. Beyond it, a
   * message on one filter could be stored after another filter's consumer last looked.
   */
  upTo: number;
}

const DEFAULT_BATCH = 200;
const DEFAULT_FIRST_WINDOW = 1024;
/** Shortest timeout of one JetStream call, even when the read's time is nearly spent. */
const MIN_CALL_MS = 100;
/** Longest timeout of one JetStream call. */
const MAX_CALL_MS = 5000;
/** A read consumer the service failed to delete goes away on its own after this long. */
const CONSUMER_IDLE_MS = 30_000;

export class DeviceInHistory {
  private readonly batch: number;
  private readonly firstWindow: number;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: DeviceInHistoryOptions,
  ) {
    this.batch = options.batch ?? DEFAULT_BATCH;
    this.firstWindow = options.firstWindow ?? DEFAULT_FIRST_WINDOW;
  }

  /** The largest message the server takes: an answer built from the history must fit in it. */
  get maxPayload(): number {
    return this.nc.info?.max_payload ?? 1024 * 1024;
  }

  /** DEVICE_IN's retention window in hours; null when it keeps messages without an age limit. */
  async retentionHours(until: number): Promise<number | null> {
    const { maxAgeNanos } = await this.state(until);
    return maxAgeNanos > 0 ? Math.round((maxAgeNanos / 3.6e12) * 100) / 100 : null;
  }

  /** The stream's last sequence now (0 when it never held a message). */
  async lastSeq(until: number): Promise<number> {
    return (await this.state(until)).lastSeq;
  }

  /** The last message on a literal subject (without the prefix, e.g. `dev.in.light.<id>.status`). */
  async last(subject: string, until: number): Promise<CapturedMessage | undefined> {
    try {
      const stored = await (await this.jsm(until)).streams.getMessage(this.options.stream, { last_by_subj: `${this.options.prefix}${subject}` });
      return this.captured(stored.seq, stored.subject, stored.header, stored.data, stored.time);
    } catch (err) {
      if ((err as NatsError).api_error?.code === 404) return undefined;
      throw err;
    }
  }

  /**
   * The newest `limit` accepted messages on the subject filters, newest first: windows ending
   * at the stream's last message, each twice as long as the one before, are read until enough
   * messages are found, the stream's first message is reached, or `until`.
   */
  async newest(subjects: readonly string[], limits: ReadLimits): Promise<NewestRead> {
    const { firstSeq, lastSeq } = await this.state(limits.until);
    const found: CapturedMessage[] = [];
    let weight = 0;
    let full = false;
    let end = lastSeq + 1;
    let window = Math.max(this.firstWindow, limits.limit);
    while (!full && end > Math.max(firstSeq, 1) && Date.now() < limits.until) {
      const start = Math.max(firstSeq, end - window, 1);
      const stopBefore = end;
      // Only as many as still fit can be kept from a window, and those are its newest.
      const room = limits.limit - found.length;
      const inWindow: CapturedMessage[] = [];
      await this.scan(subjects, { from: { seq: start }, upTo: stopBefore - 1 }, limits.until, (m) => {
        if (!limits.match || limits.match(m)) {
          inWindow.push(m);
          if (inWindow.length > room) inWindow.shift();
        }
        return true;
      });
      for (let i = inWindow.length - 1; i >= 0 && !full; i -= 1) {
        const m = inWindow[i] as CapturedMessage;
        const w = limits.weigh?.(m) ?? 0;
        if (limits.maxWeight !== undefined && found.length > 0 && weight + w > limits.maxWeight) {
          full = true;
          break;
        }
        weight += w;
        found.push(m);
        if (found.length >= limits.limit) full = true;
      }
      end = start;
      window *= 2;
    }
    return { messages: found, lastSeq };
  }

  /**
   * Accepted messages on the subject filters after a stream position or from a time, oldest
   * first, up to `limit`, `maxWeight` or `until`. `position` covers every message looked at,
   * accepted or not, so reading on from it never skips one.
   */
  async forward(subjects: readonly string[], start: ForwardStart, limits: ReadLimits): Promise<ForwardRead> {
    const { lastSeq } = await this.state(limits.until);
    let afterSeq = 'afterSeq' in start ? start.afterSeq : undefined;
    // A position past the stream's end means the stream was made anew: read it from its start.
    if (afterSeq !== undefined && afterSeq > lastSeq) afterSeq = 0;
    const messages: CapturedMessage[] = [];
    let weight = 0;
    const take = (m: CapturedMessage): boolean => {
      if (!limits.match || limits.match(m)) {
        const w = limits.weigh?.(m) ?? 0;
        if (limits.maxWeight !== undefined && messages.length > 0 && weight + w > limits.maxWeight) return false;
        weight += w;
        messages.push(m);
      }
      return true;
    };
    const from = afterSeq !== undefined ? { seq: afterSeq + 1 } : { time: (start as { atTime: Date }).atTime };
    const scan = await this.scan(subjects, { from, upTo: lastSeq }, limits.until, take, () => messages.length >= limits.limit);
    // Read to the stream's end as it was: the next read need not look at any of it again.
    const position = scan.complete ? lastSeq : (scan.lastTaken ?? Math.max(scan.startedAfter, afterSeq ?? 0));
    return { messages, position, hasMore: scan.remaining > 0 };
  }

  /**
   * Reads the subject filters forward from a position or a time, one consumer each (no
   * acknowledgements, in memory, deleted at the end), and gives the visitor their messages in
   * stream order up to `span.upTo` until it says stop, `full` says enough, or `until`.
   */
  private async scan(subjects: readonly string[], span: Span, until: number, visit: Visit, full: () => boolean = () => false): Promise<Scan> {
    const { from, upTo } = span;
    const { stream, prefix } = this.options;
    const sources: Source[] = [];
    try {
      for (const subject of subjects) {
        const info = await (await this.jsm(until)).consumers.add(stream, {
          ack_policy: AckPolicy.None,
          filter_subject: `${prefix}${subject}`,
          ...('seq' in from ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, from.seq) } : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: from.time.toISOString() }),
          mem_storage: true,
          num_replicas: 1,
          inactive_threshold: nanos(CONSUMER_IDLE_MS),
        });
        sources.push({ consumer: info.name, startedAfter: info.delivered.stream_seq, lastSeen: info.delivered.stream_seq, buffer: [], next: 0, pending: info.num_pending });
      }
      const js = this.js(until);
      let lastTaken: number | undefined;
      let complete = false;
      for (;;) {
        // Stream order needs at hand the next message of every filter that may have more up to `upTo`.
        const wanting = (s: Source): boolean => s.next >= s.buffer.length && s.pending > 0 && s.lastSeen < upTo;
        for (const source of sources) {
          if (wanting(source) && Date.now() < until) await this.fill(js, source, upTo, until);
        }
        // A filter with more that could not be fetched (time ran out, the window moved): stop here.
        if (sources.some(wanting)) break;
        let head: Source | undefined;
        for (const source of sources) {
          const m = source.buffer[source.next];
          if (m && (!head || m.seq < (head.buffer[head.next] as CapturedMessage).seq)) head = source;
        }
        const message = head?.buffer[head.next];
        if (!head || !message || message.seq > upTo) {
          complete = true;
          break;
        }
        if (full() || Date.now() >= until || !visit(message)) break;
        head.next += 1;
        lastTaken = message.seq;
      }
      return {
        startedAfter: sources.length > 0 ? Math.min(...sources.map((s) => s.startedAfter)) : 0,
        lastTaken,
        complete,
        remaining: sources.reduce((n, s) => n + (s.buffer.length - s.next) + s.pending, 0),
      };
    } finally {
      const jsm = await this.jsm(until);
      await Promise.all(sources.map((s) => jsm.consumers.delete(stream, s.consumer).catch(() => undefined)));
    }
  }

  /**
   * Fetches a filter's next messages: never more than the server holds (so it answers at once),
   * nor more than the stream holds up to `upTo` after the last one fetched.
   */
  private async fill(js: JetStreamClient, source: Source, upTo: number, until: number): Promise<void> {
    source.buffer = [];
    source.next = 0;
    const batch = Math.min(source.pending, this.batch, upTo - source.lastSeen);
    // The pull with no_wait: the server answers with what it has instead of holding the request open.
    const messages = js.fetch(this.options.stream, source.consumer, { batch, no_wait: true, expires: this.callMs(until) });
    for await (const m of messages) {
      source.buffer.push(this.fromJs(m));
      source.pending = m.info.pending;
      source.lastSeen = m.seq;
    }
  }

  private async state(until: number): Promise<StreamState> {
    const info = await (await this.jsm(until)).streams.info(this.options.stream);
    return { firstSeq: info.state.first_seq, lastSeq: info.state.last_seq, maxAgeNanos: info.config.max_age };
  }

  private fromJs(m: JsMsg): CapturedMessage {
    return this.captured(m.seq, m.subject, m.headers, m.data, new Date(Math.floor(m.info.timestampNanos / 1e6)));
  }

  private captured(seq: number, subject: string, h: MsgHdrs | undefined, data: Uint8Array, storedAt: Date): CapturedMessage {
    const direction: Direction = parseCaptureSubject(subject, this.options.prefix)?.direction ?? (subject.startsWith(`${this.options.prefix}dev.out.`) ? 'out' : 'in');
    const qos = Number(h?.get('Mqtt-Qos'));
    return {
      seq,
      topic: headerTopic(h?.get('Mqtt-Topic') ?? ''),
      payload: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'),
      direction,
      receivedAt: isoOr(h?.get('Received-At'), storedAt),
      qos: qos === 0 || qos === 1 || qos === 2 ? qos : 0,
      retain: h?.get('Mqtt-Retain') === '1',
    };
  }

  /** A manager for one call: it times out within what the read has left (no API check, so nothing is sent to make it). */
  private jsm(until: number): Promise<JetStreamManager> {
    return this.nc.jetstreamManager({ timeout: this.callMs(until), checkAPI: false });
  }

  private js(until: number): JetStreamClient {
    return this.nc.jetstream({ timeout: this.callMs(until) });
  }

  /** Whole milliseconds: a pull's `expires` goes to the server as nanoseconds, and it refuses a fraction of one. */
  private callMs(until: number): number {
    return Math.floor(Math.min(MAX_CALL_MS, Math.max(MIN_CALL_MS, until - Date.now())));
  }
}

/**
 * The topic from its header: a topic holding CR or LF is kept percent-encoded there (with `%`
 * too), since a header value cannot hold them.
 */
export function headerTopic(value: string): string {
  if (!/%0[DA]/i.test(value)) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

const isoOr = (text: string | undefined, fallback: Date): string => {
  const ms = text ? Date.parse(text) : Number.NaN;
  return new Date(Number.isNaN(ms) ? fallback.getTime() : ms).toISOString();
};

/** Until when a request may read the history: most of what it has left, keeping time to answer. */
export function readUntil(ctx: HandlerContext): number {
  const left = ctx.remainingMs();
  return Date.now() + Math.max(0, Math.min(left - 300, left * 0.8));
}

/**
 * Runs a read of the history for a request: a NATS failure (JetStream away, the stream missing,
 * a timeout) is a 503 that says nothing was read, logged with the request.
 */
export async function fromHistory<T>(ctx: HandlerContext, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    ctx.logger.warn({ err }, 'DEVICE_IN not read');
    throw new ServiceUnavailableError('The captured device traffic could not be read; retry shortly.');
  }
}
