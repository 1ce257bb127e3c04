import type { ScheduledTask } from './clock';
import { SimulatedDevice, type DeviceOptions } from './device';
import type { Product } from './credentials';

export const LIGHT_CHANNELS = ['light1', 'light2', 'light3', 'sound', 'contact'] as const;
export type LightChannel = (typeof LIGHT_CHANNELS)[number];

/** A tdl sensor the light relays. Readings drift around the base values. */
export interface SensorOptions {
  tdlId: string;
  /** Simulated seconds between readings (default 60). */
  periodSec?: number;
  /** Base temperature (default 4.0 °C); null: the sensor reports no temperature. */
  tempC?: number | null;
  /** Base relative humidity (default 45 %); null: none. */
  humidity?: number | null;
  /** breach is true while temp_c is above this (default 8 °C). */
  breachAboveC?: number;
}

export interface SensorReading {
  temp_c: number | null;
  humidity: number | null;
  breach: boolean;
  at: number;
}

export interface LightOptions extends DeviceOptions {
  sensors?: SensorOptions[];
  /** Publish every channel's state (retained) after each connect (default false: only on change). */
  publishStateOnConnect?: boolean;
}

interface SensorState {
  options: SensorOptions;
  temp: number | null;
  humidity: number | null;
  /** Values forced by a test for the next readings. */
  forced?: Partial<Omit<SensorReading, 'at'>>;
  /** A silent sensor keeps its schedule but relays nothing (a sensor out of range or dead). */
  silent?: boolean;
  task?: ScheduledTask;
}

/**
 * A notification light: echoes every `cmd/<channel>` payload on `state/<channel>` (retained,
 * QoS 1; `off`, and `stop` on sound, become the empty string; a one-shot goes back to the empty
 * string once played, see oneShotMs) and relays tdl sensor readings.
 */
export class SimulatedLight extends SimulatedDevice {
  readonly product: Product = 'light';
  /** Active wire payload per channel ('' when idle). Survives reboots (the firmware restores it). */
  readonly channels: Record<LightChannel, string> = { light1: '', light2: '', light3: '', sound: '', contact: '' };
  private readonly sensors: Map<string, SensorState>;
  private readonly lightOpts: LightOptions;
  /** When each channel's one-shot (a contact pulse, an overlay played once) ends. */
  private readonly endings: Partial<Record<LightChannel, ScheduledTask>> = {};

  constructor(options: LightOptions) {
    super(options);
    this.lightOpts = options;
    this.init({
      fwVersion: '3.2.1',
      settings: { volume: 50, brightness: 80, tz: 'UTC', wifi_ssid: 'fleet-lab', wifi_pass: 'hunter2-lab', hb_s: options.heartbeatSec ?? 300 },
      files: [{ name: 'chime.mp3', size: 48_213 }],
    });
    this.sensors = new Map(
      (options.sensors ?? []).map((s) => [s.tdlId, { options: s, temp: s.tempC === undefined ? 4 : s.tempC, humidity: s.humidity === undefined ? 45 : s.humidity }]),
    );
  }

  protected override subscriptions(): Record<string, 0 | 1 | 2> {
    return { 'cmd/+': 1 };
  }

  protected override onMessage(sub: string, payload: Buffer): void {
    if (!sub.startsWith('cmd/')) return;
    const channel = sub.slice(4);
    if (!(LIGHT_CHANNELS as readonly string[]).includes(channel)) return;
    const text = payload.toString('utf8');
    const idle = text === 'off' || (channel === 'sound' && text === 'stop');
    const active = idle ? '' : text;
    this.setChannel(channel as LightChannel, active);
    const lasts = oneShotMs(channel as LightChannel, active);
    if (lasts !== undefined) {
      // A one-shot ends on its own: the channel is idle again once it has played.
      this.endings[channel as LightChannel] = this.clock.at(this.clock.now() + lasts, () => {
        if (this.channels[channel as LightChannel] === active) this.setChannel(channel as LightChannel, '');
      });
    }
  }

  private setChannel(channel: LightChannel, active: string): void {
    this.clock.cancel(this.endings[channel]);
    this.endings[channel] = undefined;
    this.channels[channel] = active;
    void this.publish(`state/${channel}`, active, 1, true);
  }

  protected override onConnected(): void {
    if (this.lightOpts.publishStateOnConnect) for (const ch of LIGHT_CHANNELS) void this.publish(`state/${ch}`, this.channels[ch], 1, true);
    for (const s of this.sensors.values()) if (!s.task || s.task.cancelled) this.scheduleSensor(s, true);
  }

  protected override onHalt(): void {
    for (const s of this.sensors.values()) this.clock.cancel(s.task);
  }

  /** Makes the next readings of a sensor carry these values (until changed again). */
  setSensor(tdlId: string, values: Partial<Omit<SensorReading, 'at'>>): void {
    const s = this.sensors.get(tdlId);
    if (!s) throw new Error(`no sensor ${tdlId}`);
    s.forced = { ...s.forced, ...values };
  }

  /** Silences a sensor (its readings stop reaching the broker) or brings it back. */
  setSensorSilent(tdlId: string, silent: boolean): void {
    const s = this.sensors.get(tdlId);
    if (!s) throw new Error(`no sensor ${tdlId}`);
    s.silent = silent;
  }

  /** Publishes one reading now (the given one, or the sensor's next). */
  publishReading(tdlId: string, reading?: SensorReading): Promise<boolean> {
    const s = this.sensors.get(tdlId);
    const body = reading ?? (s ? this.nextReading(s) : undefined);
    if (!body) throw new Error(`no sensor ${tdlId}`);
    return this.publish(`tdl/${tdlId}`, JSON.stringify(body), 1);
  }

  private scheduleSensor(s: SensorState, first: boolean): void {
    const period = (s.options.periodSec ?? 60) * 1000;
    const wait = first ? Math.floor(Math.random() * period) + 1 : period;
    const due = (first || !s.task ? this.clock.now() : s.task.due) + wait;
    s.task = this.clock.at(due, () => {
      // Readings are taken on schedule; `at` says when, however late the timer ran.
      if (this.state === 'online' && !s.silent) void this.publish(`tdl/${s.options.tdlId}`, JSON.stringify(this.nextReading(s, due)), 1);
      if (this.state !== 'stopped' && this.state !== 'factory_reset' && this.state !== 'rebooting') this.scheduleSensor(s, false);
    });
  }

  private nextReading(s: SensorState, atMs = this.clock.now()): SensorReading {
    if (s.temp !== null) s.temp = round(s.temp + (Math.random() - 0.5) * 0.4, 2);
    if (s.humidity !== null) s.humidity = round(Math.min(100, Math.max(0, s.humidity + (Math.random() - 0.5) * 2)), 1);
    const temp = s.forced?.temp_c !== undefined ? s.forced.temp_c : s.temp;
    const humidity = s.forced?.humidity !== undefined ? s.forced.humidity : s.humidity;
    const breach = s.forced?.breach ?? (temp !== null && temp > (s.options.breachAboveC ?? 8));
    return { temp_c: temp, humidity, breach, at: Math.floor(atMs / 1000) };
  }
}

/**
 * How long a payload stays active when it ends on its own: `pulse:<ms>` on contact, and an
 * overlay `<effect>@<duration_ms>/0` (played once) on light2 or light3. Everything else stays
 * until replaced (a sound plays for as long as its file, which the simulator does not know).
 */
function oneShotMs(channel: LightChannel, payload: string): number | undefined {
  if (channel === 'contact') {
    const pulse = /^pulse:(\d+)$/.exec(payload);
    return pulse ? Number(pulse[1]) : undefined;
  }
  if (channel === 'light2' || channel === 'light3') {
    const overlay = /@(\d+)\/0$/.exec(payload);
    return overlay ? Number(overlay[1]) : undefined;
  }
  return undefined;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
