import { checkEvent, type EventPayloads } from '@fleet/contracts';
import { recordDurableEvent } from '@fleet/service-kit';
import type { RegistryTx } from './prisma';

/** The events the registry announces through its outbox (besides the partner events). */
export type RegistryEventSubject = 'evt.registry.device.changed.v1' | 'evt.registry.org.changed.v1';

/** An event's payload as the outbox keeps it, checked against its schema (see recordEvent). */
export function outboxPayload<S extends RegistryEventSubject>(subject: S, payload: EventPayloads[S]): { subject: S; payload: unknown } {
  return { subject, payload: checkEvent(subject, payload) };
}

/**
 * Writes the event of a change inside the change's transaction: it is published if and only if
 * the change commits (the service kit's outbox).
 */
export async function recordEvent<S extends RegistryEventSubject>(tx: RegistryTx, subject: S, payload: EventPayloads[S]): Promise<void> {
  await recordDurableEvent(tx, subject, payload);
}
