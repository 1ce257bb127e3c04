import { SimClock, type Clock } from './clock';
import { deviceIdsFromPrefix, type Product } from './credentials';
import { newStats, type SimStats, type SimulatedDevice } from './device';
import { SimulatedLight, type LightOptions } from './light';
import { SimulatedMeter, type MeterOptions } from './meter';

type SharedKeys = 'brokerUrl' | 'deviceId' | 'password' | 'rootSecret' | 'clock' | 'stats';
export type PoolDeviceOptions = Partial<Omit<LightOptions, SharedKeys>> & Partial<Omit<MeterOptions, SharedKeys>>;

export interface PoolOptions {
  brokerUrl: string;
  product: Product;
  /** Explicit device ids, or `idPrefix` + `count` (+ `startIndex`) as in deviceIdsFromPrefix. */
  ids?: string[];
  idPrefix?: string;
  count?: number;
  startIndex?: number;
  /** One root secret for every device, or a password per device id, or a function. */
  rootSecret?: string;
  passwords?: Record<string, string>;
  credentials?: (deviceId: string) => { password: string } | { rootSecret: string };
  /** Simulated seconds per real second (default 1); or pass a clock. */
  speed?: number;
  clock?: Clock;
  /** Connects in flight at once (default 100). */
  concurrency?: number;
  /** At most this many connects started per second (default unlimited). */
  connectRate?: number;
  /** Options every device gets (misbehaviour switches, interval, topic root, ...). */
  device?: PoolDeviceOptions;
  /** Per-device overrides, e.g. make every tenth meter lose its link. */
  perDevice?: (deviceId: string, index: number) => PoolDeviceOptions | undefined;
}

export interface StartResult {
  connected: number;
  failed: number;
  elapsedMs: number;
  /** The first few connect errors. */
  errors: string[];
}

/**
 * Many simulated devices in one process: one shared clock (one timer for every device's
 * periodic work), connects with bounded concurrency and an optional rate, shared counters,
 * and no per-device message logs unless asked for.
 */
export class DevicePool {
  readonly devices: SimulatedDevice[];
  readonly clock: Clock;
  readonly stats: SimStats = newStats();
  private readonly byId = new Map<string, SimulatedDevice>();
  private readonly options: PoolOptions;
  private readonly ownClock: boolean;

  constructor(options: PoolOptions) {
    this.options = options;
    const ids = options.ids ?? deviceIdsFromPrefix(options.idPrefix ?? '', options.count ?? 0, options.startIndex ?? 0);
    this.ownClock = !options.clock;
    this.clock = options.clock ?? new SimClock({ speed: options.speed ?? 1 });
    this.devices = ids.map((deviceId, index) => {
      const cred = options.credentials?.(deviceId) ?? (options.passwords?.[deviceId] !== undefined ? { password: options.passwords[deviceId] } : options.rootSecret !== undefined ? { rootSecret: options.rootSecret } : undefined);
      if (!cred) throw new Error(`no credentials for ${deviceId}`);
      const common = {
        logLimit: 0,
        recordLimit: 0,
        ...options.device,
        ...(options.perDevice?.(deviceId, index) ?? {}),
        ...cred,
        brokerUrl: options.brokerUrl,
        deviceId,
        clock: this.clock,
        stats: this.stats,
      };
      const device = options.product === 'meter' ? new SimulatedMeter(common as MeterOptions) : new SimulatedLight(common as LightOptions);
      this.byId.set(deviceId, device);
      return device;
    });
  }

  get(deviceId: string): SimulatedDevice | undefined {
    return this.byId.get(deviceId);
  }

  get size(): number {
    return this.devices.length;
  }

  connectedCount(): number {
    let n = 0;
    for (const d of this.devices) if (d.connected) n++;
    return n;
  }

  /** Starts every device that is not running; resolves when each has connected or failed. */
  async start(onProgress?: (done: number, failed: number) => void): Promise<StartResult> {
    const t0 = performance.now();
    const concurrency = Math.max(1, this.options.concurrency ?? 100);
    const rate = this.options.connectRate;
    const todo = this.devices.filter((d) => d.state === 'idle' || d.state === 'stopped');
    let next = 0;
    let done = 0;
    let failed = 0;
    const errors: string[] = [];
    const worker = async () => {
      for (;;) {
        const k = next++;
        const device = todo[k];
        if (!device) return;
        if (rate && rate > 0) {
          const notBefore = t0 + (k / rate) * 1000;
          const wait = notBefore - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        try {
          await device.start();
          done++;
        } catch (err) {
          failed++;
          if (errors.length < 5) errors.push((err as Error).message);
        }
        onProgress?.(done, failed);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, todo.length) }, worker));
    return { connected: done, failed, elapsedMs: performance.now() - t0, errors };
  }

  /** Stops every device (clean: `offline` then DISCONNECT; abrupt: sockets killed, wills fire). */
  async stop(options: { abrupt?: boolean; concurrency?: number } = {}): Promise<void> {
    const concurrency = Math.max(1, options.concurrency ?? 200);
    let next = 0;
    const worker = async () => {
      for (;;) {
        const device = this.devices[next++];
        if (!device) return;
        await device.stop({ abrupt: options.abrupt }).catch(() => undefined);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, this.devices.length) }, worker));
    if (this.ownClock) this.clock.stop();
  }

  /** Counters plus how many devices are connected now. */
  snapshot(): SimStats & { devices: number; connected: number } {
    return { ...this.stats, devices: this.devices.length, connected: this.connectedCount() };
  }
}
