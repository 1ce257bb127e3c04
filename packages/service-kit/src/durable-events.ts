/**
 * Events a service must not miss. An event subject with a `stream` in proto-schemas/subjects.json
 * is kept in that JetStream stream: its owner publishes with `publishDurable` (the stream has
 * stored it when the promise resolves), and each service that must see every such event reads
 * it with `durableEvents`, a durable consumer of its own that survives restarts: a service
 * that was down reads what it missed when it comes back. Services that only drop a cache
 * subscribe plainly (`Bus.subscribe`); a durable event reaches them too.
 */
import { JSONCodec, headers as natsHeaders, type JsMsg, type NatsConnection } from 'nats';
import { checkEvent, eventSubjects, type EventSubject } from '@fleet/contracts';
import type { EventOf } from './bus-types';
import type { Logger } from './logger';
import { DurablePullConsumer } from './pull-consumer';
import type { StreamPlan } from './streams';
import { currentWork, formatTraceparent, parseTraceparent, startHop, telemetryOn, TRACEPARENT_HEADER, withWork } from './trace';

const codec = JSONCodec();

/** How long a stream of durable events keeps them: a consumer down longer than this misses some. */
export const DURABLE_EVENT_RETENTION_MS = 7 * 24 * 3_600_000;

/** Event subjects kept in a stream, by stream. */
function durableSubjects(): Map<string, EventSubject[]> {
  const byStream = new Map<string, EventSubject[]>();
  for (const [subject, spec] of Object.entries(eventSubjects) as Array<[EventSubject, { stream?: string }]>) {
    if (spec.stream) byStream.set(spec.stream, [...(byStream.get(spec.stream) ?? []), subject]);
  }
  return byStream;
}

/** The stream that keeps a durable event subject (proto-schemas/subjects.json). */
export function streamOf(subject: EventSubject): string {
  const stream = (eventSubjects[subject] as { stream?: string }).stream;
  if (!stream) throw new Error(`${subject} is not a durable event (no stream in proto-schemas/subjects.json)`);
  return stream;
}

/** The plan of a stream of durable events (for ensureStream): every subject proto-schemas puts in it. */
export function eventStreamPlan(stream: string, prefix = ''): StreamPlan {
  const subjects = durableSubjects().get(stream);
  if (!subjects?.length) throw new Error(`no event subject of proto-schemas/subjects.json is kept in ${stream}`);
  return { name: stream, subjects: subjects.map((s) => `${prefix}${s}`), maxAgeMs: DURABLE_EVENT_RETENTION_MS };
}

/**
 * Publishes a durable event after checking it against its schema; resolves once its stream
 * stored it. `id` (optional) lets JetStream drop a second publish of the same event within its
 * duplicate window (2 minutes), so a publish retried after a lost acknowledgement is kept once.
 */
export async function publishDurable<S extends EventSubject>(nc: NatsConnection, subject: S, payload: EventOf<S>, options: { id?: string; timeoutMs?: number; prefix?: string } = {}): Promise<void> {
  streamOf(subject);
  checkEvent(subject, payload);
  const h = natsHeaders();
  if (options.id) h.set('Nats-Msg-Id', options.id);
  // The trace of the work that published it, for whoever consumes it.
  const work = currentWork();
  if (work) h.set(TRACEPARENT_HEADER, formatTraceparent(work.trace));
  await nc.jetstream().publish(`${options.prefix ?? ''}${subject}`, codec.encode(payload), { headers: h, timeout: options.timeoutMs ?? 5000 });
}

export interface DurableEventsOptions<S extends EventSubject> {
  subject: S;
  /** The consumer's name, one per reading service (e.g. `light-command-device-events`): its position survives restarts. */
  durable: string;
  /** Handles one event; resolves once its effect is stored. A rejection redelivers it later. */
  handle: (event: EventOf<S>, message: { subject: string; seq: number }) => Promise<void>;
  logger: Logger;
  /** Subject prefix of tests that isolate themselves on a shared NATS server. */
  prefix?: string;
  /** The stream's name, when it is not the one proto-schemas names (tests). */
  stream?: string;
}

/**
 * Reads every event of a durable subject from where this service left off, in order, one at a
 * time, acknowledging each once handled. Replicas of the service share the consumer (each event
 * is handled by one of them). An event that does not match its schema is logged and dropped.
 */
export function durableEvents<S extends EventSubject>(nc: NatsConnection, options: DurableEventsOptions<S>): DurablePullConsumer {
  const { subject, logger } = options;
  return new DurablePullConsumer(nc, {
    stream: options.stream ?? streamOf(subject),
    durable: options.durable,
    filterSubject: `${options.prefix ?? ''}${subject}`,
    batch: 1,
    logger,
    process: async (messages: JsMsg[]) => {
      const dropped = new Set<JsMsg>();
      for (const m of messages) {
        let event: EventOf<S>;
        try {
          event = checkEvent<EventOf<S>>(subject, codec.decode(m.data));
        } catch (err) {
          logger.error({ err, subject: m.subject, seq: m.seq }, 'dropped a durable event that does not match its schema');
          dropped.add(m);
          continue;
        }
        // Handled as part of the publisher's trace (a new one when it had none).
        if (!telemetryOn) {
          await options.handle(event, { subject: m.subject, seq: m.seq });
          continue;
        }
        const hop = startHop(m.subject, 'consumer', parseTraceparent(m.headers?.get(TRACEPARENT_HEADER)));
        try {
          await withWork({ trace: hop.context }, () => options.handle(event, { subject: m.subject, seq: m.seq }));
        } finally {
          hop.end();
        }
      }
      return dropped;
    },
  });
}
