/**
 * Where a device sits in the org tree, for the scope check of its events. An event whose
 * producer knew the device's node (the registry's own events) carries it; for the others the
 * registry is asked (`registry.device.lookup`), and each node's root-to-node path too
 * (`registry.org.paths`). Both are trusted for ACCESS_CACHE_MS; the registry's device events
 * that pass through the fan-out (provisioned, moved, removed) correct the device's node at once.
 */
import { randomUUID } from 'node:crypto';
import type { PartnerEventMessage } from '@fleet/contracts';
import type { RegistryClient } from '@fleet/registry-client';

type Cached<T> = { value: T; at: number };

export class DevicePlaces {
  private readonly nodeOfDevice = new Map<string, Cached<number | null>>();
  private readonly pathOfNode = new Map<number, Cached<number[] | null>>();

  constructor(
    private readonly registry: Pick<RegistryClient, 'lookupDevices' | 'orgPaths'>,
    private readonly options: { cacheMs: number },
  ) {}

  /**
   * For each message: the root-to-node paths of the nodes its device sat in (one, or two for a
   * move); [] for a device the registry no longer knows (nobody receives it); undefined for an
   * event of no device.
   */
  async placesOf(messages: readonly PartnerEventMessage[]): Promise<Array<number[][] | undefined>> {
    const now = Date.now();
    this.learn(messages, now);
    const call = { requestId: `events-${randomUUID()}` };
    const unknownDevices = [
      ...new Set(messages.filter((m) => m.event.device_id && !m.org_node_ids?.length && !this.fresh(this.nodeOfDevice.get(m.event.device_id), now)).map((m) => m.event.device_id as string)),
    ];
    if (unknownDevices.length > 0) {
      const found = new Map((await this.registry.lookupDevices(call, unknownDevices)).map((d) => [d.device_id, d.org_node?.id ?? null]));
      for (const id of unknownDevices) this.nodeOfDevice.set(id, { value: found.get(id) ?? null, at: now });
    }
    const nodesOf = messages.map((m) => {
      if (!m.event.device_id) return undefined;
      if (m.org_node_ids?.length) return m.org_node_ids;
      const node = this.nodeOfDevice.get(m.event.device_id)?.value;
      return node === null || node === undefined ? [] : [node];
    });
    const unknownNodes = [...new Set(nodesOf.flatMap((nodes) => nodes ?? []).filter((n) => !this.fresh(this.pathOfNode.get(n), now)))];
    for (let k = 0; k < unknownNodes.length; k += 1000) {
      const chunk = unknownNodes.slice(k, k + 1000);
      const paths = await this.registry.orgPaths(call, chunk);
      for (const node of chunk) this.pathOfNode.set(node, { value: paths.get(node) ?? null, at: now });
    }
    return nodesOf.map((nodes) => nodes?.flatMap((n) => {
      const path = this.pathOfNode.get(n)?.value;
      return path ? [path] : [];
    }));
  }

  /** The registry's device events say where a device is now: later events of it need not ask. */
  private learn(messages: readonly PartnerEventMessage[], now: number): void {
    for (const { event } of messages) {
      if (!event.device_id) continue;
      const data = event.data as Record<string, unknown>;
      if (event.type === 'device.removed') this.nodeOfDevice.set(event.device_id, { value: null, at: now });
      else if (event.type === 'device.provisioned' && typeof data.org_node_id === 'number') this.nodeOfDevice.set(event.device_id, { value: data.org_node_id, at: now });
      else if (event.type === 'device.moved' && typeof data.to_org_node_id === 'number') this.nodeOfDevice.set(event.device_id, { value: data.to_org_node_id, at: now });
    }
  }

  private fresh(entry: Cached<unknown> | undefined, now: number): boolean {
    return entry !== undefined && now - entry.at < this.options.cacheMs;
  }
}
