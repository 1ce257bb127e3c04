import type { Bus } from '@fleet/service-kit';
import type { DeviceSummary, Principal } from '@fleet/contracts';
import type { ScopeResolution } from '@fleet/registry-client';

const CACHE_TTL_MS = 5_000;
const CACHE_MAX_ENTRIES = 50_000;

/**
 * Resolves `{device_id}` within the partner's scope by asking the registry; out of scope and
 * nonexistent are the same 404. Answers are cached briefly per (partner, device) and dropped
 * when the registry announces a device or organization change.
 */
export class ScopeResolver {
  private readonly cache = new Map<string, { device: DeviceSummary; expires: number }>();
  private generation = 0;

  constructor(
    bus: Bus,
    private readonly registry: ScopeResolution,
  ) {
    bus.subscribe('evt.registry.device.changed.v1', (event) => this.forgetDevice(event.device_id));
    bus.subscribe('evt.registry.org.changed.v1', () => this.forgetAll());
  }

  forgetDevice(deviceId: string): void {
    this.generation++;
    for (const key of this.cache.keys()) if (key.endsWith(`|${deviceId}`)) this.cache.delete(key);
  }

  forgetAll(): void {
    this.generation++;
    this.cache.clear();
  }

  async resolve(requestId: string, principal: Principal, deviceId: string): Promise<DeviceSummary> {
    // The cache key includes the grants: a partner whose grants change resolves afresh.
    const key = `${principal.partner_id}|${principal.permissions.includes('access_all_devices')}|${principal.org_grants.join(',')}|${deviceId}`;
    const hit = this.cache.get(key);
    if (hit && hit.expires > Date.now()) return hit.device;
    const generation = this.generation;
    const device = await this.registry.resolveScope({ requestId }, principal, deviceId);
    if (generation === this.generation) {
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
      this.cache.set(key, { device, expires: Date.now() + CACHE_TTL_MS });
    }
    return device;
  }
}
