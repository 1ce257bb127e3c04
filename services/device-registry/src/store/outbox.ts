import { checkEvent, type EventPayloads } from '@fleet/contracts';
import type { Prisma } from '../generated/prisma/client';
import type { RegistryTx } from './prisma';

/** The events the registry announces through its outbox. */
export type RegistryEventSubject = 'evt.registry.device.changed.v1' | 'evt.registry.org.changed.v1';

/** An event waiting in the outbox. */
export interface PendingEvent {
  id: bigint;
  subject: string;
  payload: unknown;
  msgId: string;
}

/**
 * 'outbox' in ASCII: beyond the int4 range of the `hashtext` keys of lockDeviceId, so no device
 * lock ever takes the relay's key.
 */
const RELAY_LOCK_KEY = 0x6f7574626f78n;

/**
 * Writes the event of a change inside the change's transaction: it is published if and only if
 * the change commits. The payload is checked here, so a row the relay reads is publishable.
 */
/** An event's payload as the outbox keeps it, checked against its schema (see recordEvent). */
export function outboxPayload<S extends RegistryEventSubject>(subject: S, payload: EventPayloads[S]): { subject: S; payload: unknown } {
  return { subject, payload: checkEvent(subject, payload) };
}

export async function recordEvent<S extends RegistryEventSubject>(tx: RegistryTx, subject: S, payload: EventPayloads[S]): Promise<void> {
  await tx.outboxEvent.create({ data: { subject, payload: checkEvent<Prisma.InputJsonObject>(subject, payload) } });
}

/** Whether any event waits (a cheap look before the relay opens a transaction). */
export async function hasPendingEvents(db: RegistryTx): Promise<boolean> {
  return (await db.outboxEvent.findFirst({ select: { id: true } })) !== null;
}

/**
 * Inside a transaction: takes the relay's lock until the transaction ends, unless another
 * relay (another replica) holds it; false then.
 */
export async function tryLockRelay(tx: RegistryTx): Promise<boolean> {
  const [row] = await tx.$queryRaw<Array<{ locked: boolean }>>`SELECT pg_try_advisory_xact_lock(${RELAY_LOCK_KEY}) AS locked`;
  return row?.locked === true;
}

/** The oldest waiting events, in the order they are published. */
export async function pendingEvents(tx: RegistryTx, limit: number): Promise<PendingEvent[]> {
  return tx.outboxEvent.findMany({ select: { id: true, subject: true, payload: true, msgId: true }, orderBy: { id: 'asc' }, take: limit });
}

export async function deleteEvents(tx: RegistryTx, ids: bigint[]): Promise<void> {
  if (ids.length > 0) await tx.outboxEvent.deleteMany({ where: { id: { in: ids } } });
}
