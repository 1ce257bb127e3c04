/**
 * The fan-out: reads PARTNER_EVENTS (durable consumer shared by every replica) and turns each
 * event into one delivery per endpoint that should get it: enabled, subscribed to the type, of
 * a partner whose permissions allow the type and whose scope held the device when it happened
 * (at the event's position in the stream: see access/device-places.ts). The batch's changes of
 * place are recorded too, for live streams and replays to judge events by the same rule.
 * A batch's deliveries are stored in one statement, then the batch is acknowledged; a batch
 * that fails (the gateway, the registry or the database out of reach) is redelivered, and a
 * redelivered batch stores nothing twice (one delivery per endpoint and event).
 */
import type { JsMsg, NatsConnection } from 'nats';
import { checkEvent, partnerEventTypeOf, type EventSubject, type PartnerEventMessage } from '@fleet/contracts';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import type { DevicePlaces, PositionedEvent } from '../access/device-places';
import type { PartnerAccessDirectory } from '../access/partner-access';
import { eventFor, mayReceive } from '../domain/audience';
import { fannedOut } from '../metrics';
import { newDeliveryId } from '../domain/ids';
import { insertDeliveries, type NewDelivery } from '../store/deliveries';
import type { EventsDb } from '../store/prisma';
import { subscribersOf } from '../store/webhooks';

export interface FanoutDeps {
  db: EventsDb;
  access: PartnerAccessDirectory;
  places: DevicePlaces;
  logger: Logger;
  /** Deliveries were stored: the local worker sends them now. */
  stored: () => void;
}

/** A batch's events, decoded, with their stream positions; a message that is not a partner event is dropped (logged). */
function decode(messages: readonly JsMsg[], logger: Logger): PositionedEvent[] {
  const events: PositionedEvent[] = [];
  for (const m of messages) {
    const type = partnerEventTypeOf(m.subject);
    try {
      if (!type) throw new Error('not a partner event subject');
      const message = checkEvent<PartnerEventMessage>(`evt.partner.${type}.v1` as EventSubject, m.json());
      if (message.event.type !== type) throw new Error(`type ${message.event.type} on the subject of ${type}`);
      events.push({ seq: m.seq, message });
    } catch (err) {
      logger.warn({ err, subject: m.subject, seq: m.seq }, 'dropped a message of PARTNER_EVENTS that is not a partner event');
    }
  }
  return events;
}

/** The deliveries of a batch of events, each judged by where its device was at the event's position. */
export async function planDeliveries(deps: Omit<FanoutDeps, 'stored' | 'logger'>, events: readonly PositionedEvent[]): Promise<NewDelivery[]> {
  const subscribers = await subscribersOf(deps.db, [...new Set(events.map((e) => e.message.event.type))]);
  if (subscribers.length === 0) return [];
  const access = await deps.access.accessOf(subscribers.map((s) => s.partnerId));
  const places = await deps.places.placesOf(events);
  const deliveries: NewDelivery[] = [];
  events.forEach(({ message: { event } }, i) => {
    for (const endpoint of subscribers) {
      const partner = access.get(endpoint.partnerId);
      if (!partner || !endpoint.eventTypes.includes(event.type) || !mayReceive(partner, event.type, places[i])) continue;
      const id = newDeliveryId();
      deliveries.push({
        id,
        webhookId: endpoint.id,
        partnerId: endpoint.partnerId,
        eventId: event.id,
        eventType: event.type,
        deviceId: event.device_id ?? null,
        orderingKey: event.device_id ?? id,
        event: eventFor(partner, event, places[i]),
      });
    }
  });
  return deliveries;
}

/**
 * One batch: the changes of place it reports are recorded first (so its own events before a move
 * are judged by where the device was, and live streams and replays find them), then its
 * deliveries are planned and stored. Returns how many deliveries were stored.
 */
export async function fanOutBatch(deps: FanoutDeps, events: readonly PositionedEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  await deps.places.record(events);
  const stored = await insertDeliveries(deps.db, await planDeliveries(deps, events));
  if (stored > 0) {
    fannedOut.inc(stored);
    deps.stored();
  }
  return stored;
}

export function fanoutConsumer(nc: NatsConnection, deps: FanoutDeps, options: { stream: string; durable: string; prefix?: string }): DurablePullConsumer {
  return new DurablePullConsumer(nc, {
    stream: options.stream,
    durable: options.durable,
    filterSubject: `${options.prefix ?? ''}evt.partner.>`,
    batch: 200,
    logger: deps.logger,
    process: async (messages) => {
      await fanOutBatch(deps, decode(messages, deps.logger));
    },
  });
}
