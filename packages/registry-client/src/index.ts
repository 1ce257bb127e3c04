/**
 * The one client of device-registry's calls made by other services (subjects in
 * proto-schemas/subjects.json owned by device-registry that no partner route names), owned
 * beside the registry so every caller has the same policies:
 *
 * - **Errors**: what the registry answers about the device (404 unknown or out of scope, 409
 *   `encryption_unavailable`) reaches the caller as that ApiError; the registry out of reach,
 *   slow or failing is a 503 `service_unavailable` (nothing was decided).
 * - **Time**: a call gets no more than the request it serves has left (`deadline`).
 * - **Contract**: the bus checks bodies and replies against proto-schemas/registry/.
 */
import type { DeviceSummary, Principal, RegistryDeviceConnectivityReply, RegistryDeviceLookupReply, SubjectsOf } from '@fleet/contracts';
import { ApiError, fromEnvelopeError, NotFoundError, ServiceUnavailableError, type BodyOf, type Bus, type CallFor, type ReplyBodyOf, type RequestOf, type ServiceClientOptions } from '@fleet/service-kit';

type RegistrySubject = SubjectsOf<'device-registry'>;

export type { CallFor } from '@fleet/service-kit';

export type Connectivity = RegistryDeviceConnectivityReply;

export type RegistryClientOptions = ServiceClientOptions;

/** A device as another service needs it: product, name, org node, automation_enabled. */
export type DescribedDevice = RegistryDeviceLookupReply['devices'][number];

/** Most ids one lookup takes (proto-schemas/registry/device-lookup.json). */
export const LOOKUP_MAX = 1000;

/** A device's connectivity, as another service needs it (meter before a live reading). */
export interface ConnectivityReader {
  /**
   * `waitForConnectedMs`: when the device is not connected, how long the registry waits for a
   * bridge to report a message from it before answering (at most 2000; default 0).
   */
  connectivity(call: CallFor, deviceId: string, options?: { waitForConnectedMs?: number }): Promise<Connectivity>;
}

/** Sealing a secret setting in the device's enc1: envelope (system-files). */
export interface SettingSealer {
  sealSetting(call: CallFor, deviceId: string, key: string, value: string): Promise<string>;
}

/** Resolving `{device_id}` within a partner's scope (the gateway). */
export interface ScopeResolution {
  resolveScope(call: CallFor, principal: Principal, deviceId: string): Promise<DeviceSummary>;
}

/** Describing devices (config-alerting: a device's configuration, automation before rewriting light1). */
export interface DeviceLookup {
  lookupDevices(call: CallFor, deviceIds: string[]): Promise<DescribedDevice[]>;
}

export class RegistryClient implements ConnectivityReader, SettingSealer, ScopeResolution, DeviceLookup {
  constructor(
    private readonly bus: Bus,
    private readonly options: RegistryClientOptions,
  ) {}

  /** 404 when the registry does not know the device. */
  async connectivity(call: CallFor, deviceId: string, options: { waitForConnectedMs?: number } = {}): Promise<Connectivity> {
    const wait = options.waitForConnectedMs ? { wait_for_connected_ms: options.waitForConnectedMs } : {};
    return this.required('registry.device.connectivity', await this.call('registry.device.connectivity', call, { body: { device_id: deviceId, ...wait } }));
  }

  /** The `enc1:` value; 404 unknown device, 409 encryption_unavailable when the registry holds no settings key. */
  async sealSetting(call: CallFor, deviceId: string, key: string, value: string): Promise<string> {
    return this.required('registry.settings.seal', await this.call('registry.settings.seal', call, { body: { device_id: deviceId, key, value } })).value;
  }

  /** The known devices among the ids, in device-id order (any number of ids: asked in chunks of LOOKUP_MAX). */
  async lookupDevices(call: CallFor, deviceIds: string[]): Promise<DescribedDevice[]> {
    const ids = [...new Set(deviceIds)].sort();
    const found: DescribedDevice[] = [];
    for (let k = 0; k < ids.length; k += LOOKUP_MAX) {
      const reply = await this.call('registry.device.lookup', call, { body: { device_ids: ids.slice(k, k + LOOKUP_MAX) as [string, ...string[]] } });
      found.push(...this.required('registry.device.lookup', reply).devices);
    }
    return found;
  }

  /** Each known node's path from its root to itself (root first); unknown ids left out. At most LOOKUP_MAX ids. */
  async orgPaths(call: CallFor, orgNodeIds: number[]): Promise<Map<number, number[]>> {
    const ids = [...new Set(orgNodeIds)];
    if (ids.length === 0) return new Map();
    const reply = await this.call('registry.org.paths', call, { body: { org_node_ids: ids.slice(0, LOOKUP_MAX) as [number, ...number[]] } });
    return new Map(this.required('registry.org.paths', reply).paths.map((p) => [p.org_node_id, p.path]));
  }

  /** The device as the partner may see it; out of scope and nonexistent are the same 404. */
  async resolveScope(call: CallFor, principal: Principal, deviceId: string): Promise<DeviceSummary> {
    try {
      return this.required('registry.scope.resolve', await this.call('registry.scope.resolve', call, { principal, params: { device_id: deviceId } }));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) throw new NotFoundError('Device not found.');
      throw err;
    }
  }

  private async call<S extends RegistrySubject>(
    subject: S,
    call: CallFor,
    parts: { body?: BodyOf<S>; principal?: Principal; params?: Record<string, string> },
  ): Promise<ReplyBodyOf<S> | undefined> {
    const envelope = { request_id: call.requestId, params: parts.params ?? {}, query: {}, ...parts } as RequestOf<S>;
    // The bus answers a registry out of reach with ServiceUnavailableError (logged there).
    const reply = await this.bus.request(subject, envelope, { timeoutMs: this.options.timeoutMs, deadline: call.deadline });
    if (!reply.ok) {
      if (reply.error.status >= 500) {
        this.options.logger.warn({ subject, request_id: call.requestId, status: reply.error.status, code: reply.error.code }, 'registry failed');
        throw new ServiceUnavailableError();
      }
      throw fromEnvelopeError(reply.error);
    }
    return reply.body;
  }

  private required<T>(subject: RegistrySubject, body: T | undefined): T {
    // The bus checked the body against its schema; a registry that answered none is a bug.
    if (body === undefined) throw new Error(`device-registry answered ${subject} without its body`);
    return body;
  }
}
