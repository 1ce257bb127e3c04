/**
 * The partner-facing event types (proto-schemas/events/partner-event-types.json): which
 * permission receiving each needs, and the one way producers build an event. An event enters
 * its owner's outbox with the change it reports and reaches PARTNER_EVENTS on the subject
 * `evt.partner.<type>.v1`; the events service delivers it (webhooks, the live stream).
 */
import { randomUUID } from 'node:crypto';
import { partnerEventTypes } from './generated/partner-event-types';
import type { EventSubject } from './generated/subjects';
import type { PartnerEventMessage, Permission } from './generated/types';
import { ContractViolation, describeErrors, validatorOfSchema } from './validators';

export type PartnerEventType = keyof typeof partnerEventTypes;

/** Every partner event type, in catalog order. */
export const PARTNER_EVENT_TYPES = Object.freeze(Object.keys(partnerEventTypes) as PartnerEventType[]);

/** The type every webhook endpoint receives on demand (POST /v1/webhooks/{id}/test); never on the bus. */
export const WEBHOOK_TEST_TYPE = 'webhook.test';

export function isPartnerEventType(type: string): type is PartnerEventType {
  return Object.prototype.hasOwnProperty.call(partnerEventTypes, type);
}

/** The permission a partner needs to receive events of the type (null: only the device in scope). */
export function permissionToReceive(type: PartnerEventType): Permission | null {
  return partnerEventTypes[type].permission as Permission | null;
}

export function describePartnerEvent(type: PartnerEventType): { owner: string; description: string; data: Record<string, unknown> } {
  const { owner, description, data } = partnerEventTypes[type];
  return { owner, description, data: data as unknown as Record<string, unknown> };
}

/** The bus subject of an event type (proto-schemas/subjects.json lists each). */
export function partnerEventSubject(type: PartnerEventType): EventSubject {
  return `evt.partner.${type}.v1` as EventSubject;
}

/** The type of an event subject of PARTNER_EVENTS (any test prefix before `evt.` ignored). */
export function partnerEventTypeOf(subject: string): PartnerEventType | undefined {
  const match = /(?:^|\.)evt\.partner\.([a-z_]+\.[a-z_]+)\.v1$/.exec(subject);
  const type = match?.[1];
  return type !== undefined && isPartnerEventType(type) ? type : undefined;
}

/** A new event id: `evt_` and 32 hexadecimal characters. */
export function newPartnerEventId(): string {
  return `evt_${randomUUID().replace(/-/g, '')}`;
}

export interface PartnerEventFields {
  deviceId?: string;
  data: Record<string, unknown>;
  occurredAt?: Date;
  /** The organization node(s) the device sat in when it happened, when the producer knows them. */
  orgNodeIds?: number[];
}

/** A new event of the type, its data checked against the catalog (a ContractViolation otherwise). */
export function newPartnerEvent(type: PartnerEventType, fields: PartnerEventFields): PartnerEventMessage {
  const check = validatorOfSchema(`partner-event:${type}`, partnerEventTypes[type].data as unknown as Record<string, unknown>);
  if (!check(fields.data)) throw new ContractViolation(`data of ${type}`, describeErrors(check.errors));
  return {
    event: {
      id: newPartnerEventId(),
      type,
      version: 1,
      occurred_at: (fields.occurredAt ?? new Date()).toISOString(),
      ...(fields.deviceId ? { device_id: fields.deviceId } : {}),
      data: fields.data,
    },
    ...(fields.orgNodeIds?.length ? { org_node_ids: fields.orgNodeIds } : {}),
  };
}

/**
 * The envelope with its fields in the documented order (id, type, version, occurred_at,
 * device_id, data): storage in jsonb columns reorders keys, and partners read the JSON.
 */
export function inEnvelopeOrder(event: PartnerEventMessage['event'] | Record<string, unknown>): Record<string, unknown> {
  const { id, type, version, occurred_at: occurredAt, device_id: deviceId, data, ...rest } = event as Record<string, unknown>;
  return { id, type, version, occurred_at: occurredAt, ...(deviceId !== undefined ? { device_id: deviceId } : {}), data, ...rest };
}
