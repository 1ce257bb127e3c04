/**
 * Where a device sat in the org tree when an event of it happened, for the scope check of the
 * event, at the event's own position in PARTNER_EVENTS: the same answer for the fan-out
 * (webhooks), a live stream and a stream replayed from Last-Event-ID.
 *
 * - An event whose producer knew the device's node carries it (`org_node_ids`: the registry's own
 *   events; a move carries both nodes).
 * - Otherwise the device's place changes are asked: the fan-out records every change it reads
 *   (device.provisioned, device.moved, device.removed, with their stream positions) in
 *   `device_place_changes`, and the place at position S is the node the device left at its first
 *   change after S (none when that change provisioned it: the device did not exist yet).
 * - A device with no change after S is where it is now: the registry is asked
 *   (`registry.device.lookup`), and each node's root-to-node path too (`registry.org.paths`). Both
 *   are trusted for ACCESS_CACHE_MS, except that a device's answer is asked again as soon as a
 *   later change of it is read or recorded (the registry commits a change before its event leaves).
 *
 * What stays imprecise: an event judged after its device's move was committed in the registry but
 * before the move's own event was recorded gets the new place (the window is the registry's
 * outbox relay plus the fan-out's lag, normally milliseconds); replays read long after are exact.
 */
import { randomUUID } from 'node:crypto';
import type { PartnerEventMessage } from '@fleet/contracts';
import type { RegistryClient } from '@fleet/registry-client';
import { placesAt, recordPlaceChanges, type NewPlaceChange } from '../store/place-changes';
import type { EventsTx } from '../store/prisma';

/** An event of PARTNER_EVENTS with its stream position. */
export interface PositionedEvent {
  seq: number;
  message: PartnerEventMessage;
}

type Cached<T> = { value: T; at: number };

/** The change of place an event reports, if it reports one (provisioned, moved, removed). */
export function placeChangeOf({ seq, message: { event } }: PositionedEvent): NewPlaceChange | undefined {
  if (!event.device_id) return undefined;
  const data = event.data as Record<string, unknown>;
  const node = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) ? value : undefined);
  const change = (fromNode: number | null | undefined, toNode: number | null | undefined): NewPlaceChange | undefined =>
    fromNode === undefined || toNode === undefined ? undefined : { eventId: event.id, seq, deviceId: event.device_id as string, fromNode, toNode };
  if (event.type === 'device.provisioned') return change(null, node(data.org_node_id));
  if (event.type === 'device.moved') return change(node(data.from_org_node_id), node(data.to_org_node_id));
  if (event.type === 'device.removed') return change(node(data.org_node_id), null);
  return undefined;
}

export class DevicePlaces {
  /** The registry's answer for a device, with the position of the device's latest recorded change when it was asked. */
  private readonly nodeOfDevice = new Map<string, Cached<number | null> & { changeSeq: number | null }>();
  private readonly pathOfNode = new Map<number, Cached<number[] | null>>();

  constructor(
    private readonly registry: Pick<RegistryClient, 'lookupDevices' | 'orgPaths'>,
    private readonly db: EventsTx,
    private readonly options: { cacheMs: number },
  ) {}

  /** Records the changes of place among the events (the fan-out, before it plans their deliveries). */
  async record(events: readonly PositionedEvent[]): Promise<void> {
    await recordPlaceChanges(this.db, events.flatMap((e) => placeChangeOf(e) ?? []));
  }

  /**
   * For each event: the root-to-node paths of the nodes its device sat in at the event's position
   * (one, or two for a move); [] when the device did not exist then, or the registry no longer
   * knows it (nobody receives it); undefined for an event of no device.
   */
  async placesOf(events: readonly PositionedEvent[]): Promise<Array<number[][] | undefined>> {
    const now = Date.now();
    // A change read here is committed in the registry: what it answered before is stale.
    for (const e of events) if (placeChangeOf(e)) this.nodeOfDevice.delete(e.message.event.device_id as string);
    const asked = events.flatMap((e, i) => (e.message.event.device_id && !e.message.org_node_ids?.length ? [{ i, deviceId: e.message.event.device_id, seq: e.seq }] : []));
    const history = await placesAt(this.db, asked);
    const nodesOf: Array<number[] | undefined> = events.map((e) => (e.message.event.device_id ? e.message.org_node_ids : undefined));
    /** Devices with no change after their event: where they are now, by the registry. */
    const current = new Map<string, number | null>();
    asked.forEach(({ i, deviceId }, k) => {
      const at = history[k] as (typeof history)[number];
      if (at.before !== undefined) nodesOf[i] = at.before === null ? [] : [at.before];
      else current.set(deviceId, at.latestSeq);
    });
    const stale = [...current].filter(([id, latestSeq]) => {
      const entry = this.nodeOfDevice.get(id);
      return !entry || !this.fresh(entry, now) || entry.changeSeq !== latestSeq;
    });
    if (stale.length > 0) {
      const call = { requestId: `events-${randomUUID()}` };
      const found = new Map((await this.registry.lookupDevices(call, stale.map(([id]) => id))).map((d) => [d.device_id, d.org_node?.id ?? null]));
      for (const [id, changeSeq] of stale) this.nodeOfDevice.set(id, { value: found.get(id) ?? null, at: now, changeSeq });
    }
    for (const { i, deviceId } of asked) {
      if (nodesOf[i] !== undefined) continue;
      const node = this.nodeOfDevice.get(deviceId)?.value;
      nodesOf[i] = node === null || node === undefined ? [] : [node];
    }
    await this.learnPaths(nodesOf, now);
    return nodesOf.map((nodes) =>
      nodes?.flatMap((n) => {
        const path = this.pathOfNode.get(n)?.value;
        return path ? [path] : [];
      }),
    );
  }

  private async learnPaths(nodesOf: ReadonlyArray<number[] | undefined>, now: number): Promise<void> {
    const unknownNodes = [...new Set(nodesOf.flatMap((nodes) => nodes ?? []).filter((n) => !this.fresh(this.pathOfNode.get(n), now)))];
    const call = { requestId: `events-${randomUUID()}` };
    for (let k = 0; k < unknownNodes.length; k += 1000) {
      const chunk = unknownNodes.slice(k, k + 1000);
      const paths = await this.registry.orgPaths(call, chunk);
      for (const node of chunk) this.pathOfNode.set(node, { value: paths.get(node) ?? null, at: now });
    }
  }

  private fresh(entry: Cached<unknown> | undefined, now: number): boolean {
    return entry !== undefined && now - entry.at < this.options.cacheMs;
  }
}
