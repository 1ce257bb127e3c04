/**
 * A stand-in for device-registry's calls from other services (through @fleet/registry-client)
 * in tests of those services. It serves registry.device.connectivity, registry.device.lookup,
 * registry.org.paths, registry.settings.seal and registry.scope.resolve on the test's NATS connection (under a subject prefix if the test
 * isolates itself with one), checks every body against proto-schemas as the real registry's bus
 * does, and answers from what the test set: a device it was not told of is 404, as the registry
 * answers it.
 */
import { JSONCodec, type NatsConnection, type Subscription } from 'nats';
import {
  checkReplyBody,
  checkRequestBody,
  type DeviceSummary,
  type RegistryDeviceConnectivityReply,
  type RegistryDeviceLookupReply,
  type RequestEnvelope,
  type SubjectsOf,
} from '@fleet/contracts';

type RegistrySubject = SubjectsOf<'device-registry'>;
type Answer = { ok: true; status: number; body: Record<string, unknown> } | { ok: false; error: { status: number; code: string; message: string } };

const codec = JSONCodec();
const notFound = (): Answer => ({ ok: false, error: { status: 404, code: 'not_found', message: 'Device not found.' } });

export class RegistryStandIn {
  /** Connectivity by device id; a device missing here is unknown to the registry (404). */
  readonly connectivity = new Map<string, RegistryDeviceConnectivityReply>();
  /** Devices in every partner's scope, by id; others are 404. */
  readonly devices = new Map<string, DeviceSummary>();
  /** What registry.device.lookup answers, by device id; others are left out, as unknown devices are. */
  readonly described = new Map<string, RegistryDeviceLookupReply['devices'][number]>();
  /** What registry.org.paths answers: each node's path from its root (root first); others are left out. */
  readonly orgPaths = new Map<number, number[]>();
  /** Settings keys by device id: a device here seals (with a recognisable, not real, envelope); others are 409 encryption_unavailable. */
  readonly sealing = new Set<string>();
  /** Every request taken, in order, with its subject. */
  readonly requests: Array<{ subject: RegistrySubject; envelope: RequestEnvelope }> = [];
  mode: 'ok' | 'refuse' | 'silent' = 'ok';
  private readonly subs: Subscription[] = [];

  constructor(nc: NatsConnection, options: { prefix?: string } = {}) {
    const prefix = options.prefix ?? '';
    const serve = (subject: RegistrySubject, answer: (req: RequestEnvelope) => Answer) =>
      this.subs.push(nc.subscribe(`${prefix}${subject}`, { callback: (_err, msg) => this.take(subject, msg.data, answer, (a) => msg.respond(codec.encode(a))) }));
    serve('registry.device.connectivity', (req) => {
      const link = this.connectivity.get((req.body as { device_id: string }).device_id);
      return link ? { ok: true, status: 200, body: { ...link } } : notFound();
    });
    serve('registry.settings.seal', (req) => {
      const { device_id: deviceId, key, value } = req.body as { device_id: string; key: string; value: string };
      if (!this.sealing.has(deviceId)) return { ok: false, error: { status: 409, code: 'encryption_unavailable', message: 'No settings key.' } };
      return { ok: true, status: 200, body: { value: `enc1:${Buffer.from(`${deviceId}|${key}|${value}`).toString('base64url')}` } };
    });
    serve('registry.device.lookup', (req) => {
      const ids = [...new Set((req.body as { device_ids: string[] }).device_ids)].sort();
      return { ok: true, status: 200, body: { devices: ids.flatMap((id) => (this.described.has(id) ? [{ ...this.described.get(id)! }] : [])) } };
    });
    serve('registry.org.paths', (req) => {
      const ids = (req.body as { org_node_ids: number[] }).org_node_ids;
      return { ok: true, status: 200, body: { paths: ids.flatMap((id) => (this.orgPaths.has(id) ? [{ org_node_id: id, path: [...this.orgPaths.get(id)!] }] : [])) } };
    });
    serve('registry.scope.resolve', (req) => {
      const device = this.devices.get(req.params.device_id ?? '');
      return device ? { ok: true, status: 200, body: { ...device } } : notFound();
    });
  }

  private take(subject: RegistrySubject, data: Uint8Array, answer: (req: RequestEnvelope) => Answer, respond: (a: Answer) => void): void {
    if (this.mode === 'silent') return;
    if (this.mode === 'refuse') return respond({ ok: false, error: { status: 503, code: 'service_unavailable', message: 'The registry is failing.' } });
    const envelope = codec.decode(data) as RequestEnvelope;
    try {
      checkRequestBody(subject, envelope.body);
    } catch (err) {
      return respond({ ok: false, error: { status: 400, code: 'validation_error', message: (err as Error).message } });
    }
    this.requests.push({ subject, envelope });
    const reply = answer(envelope);
    if (reply.ok) checkReplyBody(subject, reply.body);
    respond(reply);
  }

  /** Forgets what was set and recorded and goes back to answering. */
  reset(): void {
    this.connectivity.clear();
    this.devices.clear();
    this.described.clear();
    this.orgPaths.clear();
    this.sealing.clear();
    this.requests.length = 0;
    this.mode = 'ok';
  }

  close(): void {
    for (const sub of this.subs) sub.unsubscribe();
  }
}
