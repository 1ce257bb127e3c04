import { createHash, randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { connect, type IClientOptions, type MqttClient } from 'mqtt';
import { SimClock, type Clock, type ScheduledTask } from './clock';
import { assertBrokerPassword, assertDeviceId, assertRootSecret, deriveBrokerPassword, deriveSettingsKey, isSecretSettingKey, openSetting, type Product } from './credentials';
import { ackLine, arg, parseSysCommand, type AckResult, type SysCommand } from '@fleet/device-protocol';

/** A message the device received or sent, byte for byte. */
export interface DeviceMessage {
  /** Full MQTT topic. */
  topic: string;
  /** Topic below `<root>/<device_id>/`, e.g. `sys/exe`, `cmd/light1`, `iv`. */
  sub: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  /** Wall-clock epoch ms. */
  at: number;
  /** Simulated epoch ms. */
  simAt: number;
}

/** Counters a device adds to; a pool hands every device the same object. */
export interface SimStats {
  connects: number;
  disconnects: number;
  connectErrors: number;
  sent: number;
  received: number;
  suppressed: number;
  acks: number;
  records: number;
}

export function newStats(): SimStats {
  return { connects: 0, disconnects: 0, connectErrors: 0, sent: 0, received: 0, suppressed: 0, acks: 0, records: 0 };
}

export type SettingValue = string | number | boolean;
export interface FileEntry {
  name: string;
  size: number;
}

export interface DeviceOptions {
  brokerUrl: string;
  /** 12 uppercase hex characters; also client id and username. */
  deviceId: string;
  /** The broker password (32 lowercase hex), or... */
  password?: string;
  /** ...the 16-character root secret it is derived from (also gives the settings key for `enc1:` values). */
  rootSecret?: string;
  /** Topic root; default the product (`light` or `meter`). */
  topicRoot?: string;
  /** Shared simulated clock; default a private SimClock running at `speed`. */
  clock?: Clock;
  /** Simulated seconds per real second when the device makes its own clock (default 1). */
  speed?: number;
  /** MQTT protocol level: 4 (3.1.1, default) or 5. */
  protocolVersion?: 4 | 5;
  /** MQTT 5 only: session expiry in seconds (lets a test's broker sessions go away on their own). */
  sessionExpirySec?: number;
  /** Default 60, as the protocol says. */
  keepaliveSec?: number;
  /** Real ms between reconnect attempts (default 1000; 0 disables reconnecting). */
  reconnectMs?: number;
  /** Real ms to wait for CONNACK (default 30000). */
  connectTimeoutMs?: number;
  /** Real ms the device stays away during a reboot (default 200). */
  rebootDelayMs?: number;
  /** Real ms a clean stop may take (offline acknowledged, DISCONNECT sent) before the socket is closed anyway (default 3000). */
  stopGraceMs?: number;
  /** Simulated seconds between heartbeats (default 300). */
  heartbeatSec?: number;
  fwVersion?: string;
  /** Initial settings (merged over the product's defaults). */
  settings?: Record<string, SettingValue>;
  files?: FileEntry[];
  /** `enc` reported in sys/settings (false = old firmware without secret settings). Default true. */
  enc?: boolean;
  /** addfile/setcert really download the URL and check its SHA-256 (default false: accepted as is). */
  fetchFiles?: boolean;
  /** Accept ota_update images (default false: refused, as an unsigned image would be). */
  acceptOta?: boolean;
  /** Setting keys that apply at once and are acknowledged `applied` instead of `ok`. */
  immediateKeys?: string[];
  /** How many received and sent messages to keep in `received`/`sent` (default 500; pools use 0). */
  logLimit?: number;
  /** Shared counters (a pool passes one object to every device). */
  stats?: SimStats;

  // Misbehaviour switches (all can also be changed later with `misbehave()`).
  /** Connects but sends nothing at all. */
  silent?: boolean;
  /** Acknowledges verbs with `failed:<refuseReason>`: true for every verb, or a list of verbs. */
  refuse?: boolean | string[];
  refuseReason?: string;
  /** stop() kills the socket instead of a clean DISCONNECT, so the broker publishes the will. */
  dropWillOnDisconnect?: boolean;
  /** Sends `log>...` lines on sys/resp around some verbs and at boot. */
  logLines?: boolean;
}

export interface Misbehaviour {
  silent: boolean;
  refuse: boolean | string[];
  refuseReason: string;
  dropWillOnDisconnect: boolean;
  logLines: boolean;
}

export type DeviceState = 'idle' | 'connecting' | 'online' | 'offline' | 'rebooting' | 'stopped' | 'factory_reset';

const MASK = '*****';

/**
 * Behaviour both products share: credentials, will, status, sys/settings, heartbeat and the
 * system command verbs. Events: `connect`, `disconnect`, `received` (DeviceMessage),
 * `sent` (DeviceMessage), `ack` (line), `boot`, `factory_reset`, `error`.
 */
export abstract class SimulatedDevice extends EventEmitter {
  abstract readonly product: Product;
  readonly deviceId: string;
  readonly brokerUrl: string;
  readonly clock: Clock;
  readonly stats: SimStats;
  readonly received: DeviceMessage[] = [];
  readonly sent: DeviceMessage[] = [];
  readonly misbehaviour: Misbehaviour;
  /** Settings now in force, and writes waiting for the next reboot. */
  activeSettings: Record<string, SettingValue> = {};
  pendingSettings: Record<string, SettingValue> = {};
  files: FileEntry[];
  fwVersion: string;
  state: DeviceState = 'idle';
  /** Simulated epoch ms of the last boot. */
  bootAt = 0;
  boots = 0;

  protected readonly opts: DeviceOptions;
  protected client: MqttClient | undefined;
  private password: string | undefined;
  private settingsKey: Buffer | undefined;
  private heartbeatTask: ScheduledTask | undefined;
  private commandChain: Promise<void> = Promise.resolve();
  private readonly inflight = new Set<() => void>();
  private abandonStart: (() => void) | undefined;
  private topicRootValue: string | undefined;

  constructor(options: DeviceOptions) {
    super();
    assertDeviceId(options.deviceId);
    this.opts = options;
    this.deviceId = options.deviceId;
    this.brokerUrl = options.brokerUrl;
    this.clock = options.clock ?? new SimClock({ speed: options.speed ?? 1 });
    this.stats = options.stats ?? newStats();
    this.fwVersion = options.fwVersion ?? '';
    this.files = (options.files ?? []).map((f) => ({ ...f }));
    this.misbehaviour = {
      silent: options.silent ?? false,
      refuse: options.refuse ?? false,
      refuseReason: options.refuseReason ?? 'refused',
      dropWillOnDisconnect: options.dropWillOnDisconnect ?? false,
      logLines: options.logLines ?? false,
    };
    if (options.password !== undefined) {
      assertBrokerPassword(options.password);
      this.password = options.password;
    }
    if (options.rootSecret !== undefined) assertRootSecret(options.rootSecret);
    if (options.password === undefined && options.rootSecret === undefined) throw new Error('give password or rootSecret');
    if (options.protocolVersion === 5 || options.sessionExpirySec !== undefined) {
      if (options.protocolVersion === 4) throw new Error('sessionExpirySec needs protocolVersion 5');
    }
  }

  /** Call from subclass constructors once `product` is set. */
  protected init(defaults: { fwVersion: string; settings: Record<string, SettingValue>; files: FileEntry[] }): void {
    if (this.opts.rootSecret !== undefined) {
      this.password ??= deriveBrokerPassword(this.opts.rootSecret, this.deviceId, this.product);
      this.settingsKey = deriveSettingsKey(this.opts.rootSecret, this.deviceId, this.product);
    }
    this.fwVersion = this.opts.fwVersion ?? defaults.fwVersion;
    if (!this.opts.files) this.files = defaults.files.map((f) => ({ ...f }));
    this.activeSettings = { ...defaults.settings, ...(this.opts.settings ?? {}) };
  }

  get topicRoot(): string {
    return (this.topicRootValue ??= this.opts.topicRoot ?? this.product);
  }

  /** `<root>/<device_id>` */
  get base(): string {
    return `${this.topicRoot}/${this.deviceId}`;
  }

  /** QoS 1 and 2 publishes still waiting for the broker's acknowledgement. */
  get unacknowledged(): number {
    return this.inflight.size;
  }

  get connected(): boolean {
    return this.state === 'online';
  }

  /** The broker password this device uses (undefined after factory_reset). */
  get brokerPassword(): string | undefined {
    return this.password;
  }

  /** Simulated seconds since the last boot. */
  uptimeSec(): number {
    return Math.floor((this.clock.now() - this.bootAt) / 1000);
  }

  /** Changes misbehaviour switches at run time. */
  misbehave(changes: Partial<Misbehaviour>): this {
    Object.assign(this.misbehaviour, changes);
    return this;
  }

  /** Boots and connects; resolves at the first CONNACK, rejects if the broker refuses or times out. */
  async start(): Promise<void> {
    if (this.state === 'factory_reset' || this.password === undefined) throw new Error(`${this.deviceId} has no broker credentials (factory reset)`);
    if (this.state !== 'idle' && this.state !== 'stopped') throw new Error(`${this.deviceId} already started`);
    this.boot('power_on');
    await this.connectClient();
  }

  /**
   * Stops. Clean by default: publishes `offline` (retained) and disconnects, so the broker
   * drops the will. With `dropWillOnDisconnect` (or `{ abrupt: true }`) the socket is killed
   * instead and the broker publishes the will.
   */
  async stop(options: { abrupt?: boolean } = {}): Promise<void> {
    const client = this.client;
    this.halt();
    this.state = 'stopped';
    if (!client) return;
    this.client = undefined;
    if (options.abrupt ?? this.misbehaviour.dropWillOnDisconnect) {
      this.endClient(client);
      return;
    }
    // A clean goodbye, but never an endless one: a broker that stops answering (or an
    // in-flight message it never acknowledges) ends in a forced close after a while.
    const graceMs = this.opts.stopGraceMs ?? 3000;
    const clean = (async () => {
      if (client.connected && !this.misbehaviour.silent) {
        this.logSent('status', Buffer.from('offline'), 1, true);
        await new Promise<void>((resolve) => client.publish(`${this.base}/status`, 'offline', { qos: 1, retain: true }, () => resolve()));
      }
      await new Promise<void>((resolve) => client.end(false, {}, () => resolve()));
      return true;
    })();
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([clean, new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
    clearTimeout(timer);
    if (!done) client.end(true);
    this.settleInflight();
  }

  /** Kills the socket without DISCONNECT (power loss): the broker publishes the will. Does not reconnect. */
  kill(): Promise<void> {
    return this.stop({ abrupt: true });
  }

  /** Power-cycles: socket killed (will fires), pending settings applied, reconnect after `offlineMs` real ms. */
  async restart(options: { offlineMs?: number; reason?: string } = {}): Promise<void> {
    if (this.state === 'factory_reset') throw new Error('factory reset: no credentials');
    const client = this.client;
    this.halt();
    this.client = undefined;
    this.state = 'rebooting';
    if (client) this.endClient(client);
    await delay(options.offlineMs ?? this.opts.rebootDelayMs ?? 200);
    if (this.state !== 'rebooting') return;
    this.boot(options.reason ?? 'restart');
    await this.connectClient();
  }

  /** Resolves with the first message (already logged, or arriving later) that matches. */
  waitFor(direction: 'sent' | 'received', match: (m: DeviceMessage) => boolean, timeoutMs = 5000): Promise<DeviceMessage> {
    const found = (direction === 'sent' ? this.sent : this.received).find(match);
    if (found) return Promise.resolve(found);
    return this.next(direction, match, timeoutMs);
  }

  /** Resolves with the next message from now on that matches. */
  next(direction: 'sent' | 'received', match: (m: DeviceMessage) => boolean = () => true, timeoutMs = 5000): Promise<DeviceMessage> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off(direction, listener);
        reject(new Error(`${this.deviceId}: no matching ${direction} message within ${timeoutMs} ms`));
      }, timeoutMs);
      const listener = (m: DeviceMessage) => {
        if (!match(m)) return;
        clearTimeout(timer);
        this.off(direction, listener);
        resolve(m);
      };
      this.on(direction, listener);
    });
  }

  /** The sys/settings object as the device would publish it now (secrets masked). */
  settingsDocument(): Record<string, unknown> {
    const doc: Record<string, unknown> = { fw_ver: this.fwVersion, file_list: this.files.map((f) => ({ name: f.name, size: f.size })) };
    for (const [k, v] of Object.entries(this.activeSettings)) doc[k] = isSecretSettingKey(k) ? MASK : v;
    doc.enc = this.opts.enc ?? true;
    return doc;
  }

  // ---- subclass hooks -------------------------------------------------------------------

  /** A (re)boot: new stream ids, reset timers. */
  protected onBoot(_reason: string): void {}
  /** After every CONNACK, once online and settings are out. */
  protected onConnected(_sessionPresent: boolean): void {}
  /** Stops product timers (stop, reboot, factory reset). */
  protected onHalt(): void {}
  /** Extra subscriptions (topic below base → QoS). */
  protected subscriptions(): Record<string, 0 | 1 | 2> {
    return {};
  }
  /** A message on a topic other than sys/exe. */
  protected onMessage(_sub: string, _payload: Buffer): void {}
  /** Product verbs: return an acknowledgement (or undefined when the verb is unknown). */
  protected productVerb(_cmd: SysCommand): Promise<string | undefined> | string | undefined {
    return undefined;
  }
  /** A verb check made before the refusal switch (meters: unreadable reset tokens). */
  protected precheck(_cmd: SysCommand): string | undefined {
    return undefined;
  }
  protected isProductVerb(_verb: string): boolean {
    return false;
  }

  // ---- publishing ------------------------------------------------------------------------

  /** Publishes below the device's base topic; dropped (and counted as suppressed) while silent. */
  protected publish(sub: string, payload: string | Buffer, qos: 0 | 1 | 2, retain = false): Promise<void> {
    const client = this.client;
    if (!client || this.misbehaviour.silent) {
      this.stats.suppressed++;
      return Promise.resolve();
    }
    const buf = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
    this.logSent(sub, buf, qos, retain);
    return new Promise((resolve) => {
      const done = () => {
        this.inflight.delete(done);
        resolve();
      };
      if (qos > 0) this.inflight.add(done);
      client.publish(`${this.base}/${sub}`, buf, { qos, retain }, (err) => {
        if (err) this.reportError(err);
        done();
      });
    });
  }

  /** 'error' events only reach listeners that asked for them; nobody listening is not a crash. */
  private reportError(err: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  /** Kills a client's socket (no DISCONNECT, so the will fires) and settles its unacknowledged publishes. */
  private endClient(client: MqttClient): void {
    client.end(true);
    this.settleInflight();
  }

  /** Publishes of an ended client never get their PUBACK; nobody should wait for them. */
  private settleInflight(): void {
    for (const done of [...this.inflight]) done();
  }

  protected sendAck(line: string): Promise<void> {
    this.stats.acks++;
    this.emit('ack', line);
    return this.publish('sys/resp', line, 1);
  }

  protected sendLog(text: string): Promise<void> {
    if (!this.misbehaviour.logLines) return Promise.resolve();
    return this.publish('sys/resp', `log>${text}`, 1);
  }

  protected publishSettings(): Promise<void> {
    return this.publish('sys/settings', JSON.stringify(this.settingsDocument()), 1);
  }

  // ---- internals -------------------------------------------------------------------------

  private logSent(sub: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): void {
    this.stats.sent++;
    const limit = this.opts.logLimit ?? 500;
    const hasListeners = this.listenerCount('sent') > 0;
    if (limit <= 0 && !hasListeners) return;
    const m: DeviceMessage = { topic: `${this.base}/${sub}`, sub, payload, qos, retain, at: Date.now(), simAt: this.clock.now() };
    if (limit > 0) {
      this.sent.push(m);
      if (this.sent.length > limit) this.sent.shift();
    }
    if (hasListeners) this.emit('sent', m);
  }

  private logReceived(topic: string, sub: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): void {
    this.stats.received++;
    const limit = this.opts.logLimit ?? 500;
    const hasListeners = this.listenerCount('received') > 0;
    if (limit <= 0 && !hasListeners) return;
    const m: DeviceMessage = { topic, sub, payload, qos, retain, at: Date.now(), simAt: this.clock.now() };
    if (limit > 0) {
      this.received.push(m);
      if (this.received.length > limit) this.received.shift();
    }
    if (hasListeners) this.emit('received', m);
  }

  private boot(reason: string): void {
    this.boots++;
    this.bootAt = this.clock.now();
    if (Object.keys(this.pendingSettings).length > 0) {
      this.activeSettings = { ...this.activeSettings, ...this.pendingSettings };
      this.pendingSettings = {};
    }
    this.onBoot(reason);
    this.emit('boot', reason);
    this.bootReason = reason;
  }
  private bootReason = 'power_on';

  private halt(): void {
    this.abandonStart?.();
    this.abandonStart = undefined;
    this.clock.cancel(this.heartbeatTask);
    this.heartbeatTask = undefined;
    this.onHalt();
  }

  private clientOptions(): IClientOptions {
    const v5 = this.opts.protocolVersion === 5 || this.opts.sessionExpirySec !== undefined;
    return {
      clientId: this.deviceId,
      username: this.deviceId,
      password: this.password,
      clean: false,
      keepalive: this.opts.keepaliveSec ?? 60,
      protocolVersion: v5 ? 5 : 4,
      reconnectPeriod: this.opts.reconnectMs ?? 1000,
      connectTimeout: this.opts.connectTimeoutMs ?? 30_000,
      resubscribe: false,
      will: { topic: `${this.base}/status`, payload: Buffer.from('offline'), qos: 1, retain: true },
      ...(v5 && this.opts.sessionExpirySec !== undefined ? { properties: { sessionExpiryInterval: this.opts.sessionExpirySec } } : {}),
    };
  }

  private connectClient(): Promise<void> {
    this.state = 'connecting';
    const client = connect(this.brokerUrl, this.clientOptions());
    this.client = client;
    let first = true;
    return new Promise<void>((resolve, reject) => {
      // stop(), kill() or restart() before the first CONNACK ends this attempt.
      this.abandonStart = () => {
        if (!first) return;
        first = false;
        reject(new Error(`${this.deviceId}: stopped before connecting`));
      };
      client.on('connect', (connack) => {
        if (this.client !== client) return;
        this.stats.connects++;
        this.state = 'online';
        this.afterConnect(client, connack.sessionPresent);
        this.emit('connect', connack.sessionPresent);
        if (first) {
          first = false;
          resolve();
        }
      });
      client.on('close', () => {
        if (this.client !== client) return;
        if (this.state === 'online') {
          this.stats.disconnects++;
          this.state = 'offline';
          this.emit('disconnect');
        }
      });
      client.on('error', (err) => {
        if (this.client !== client) return;
        if (first) {
          first = false;
          this.stats.connectErrors++;
          this.client = undefined;
          this.state = 'stopped';
          this.halt();
          this.endClient(client);
          reject(new Error(`${this.deviceId}: ${err.message}`));
          return;
        }
        this.reportError(err);
      });
      client.on('message', (topic, payload, packet) => {
        if (this.client !== client) return;
        const sub = topic.startsWith(`${this.base}/`) ? topic.slice(this.base.length + 1) : topic;
        this.logReceived(topic, sub, payload, packet.qos, packet.retain);
        if (sub === 'sys/exe') this.enqueueCommand(payload.toString('utf8'));
        else this.onMessage(sub, payload);
      });
    });
  }

  private afterConnect(client: MqttClient, sessionPresent: boolean): void {
    // Subscribe after every connect, session or not: a session left by an earlier run under
    // another topic root would otherwise leave the device deaf.
    const topics: Record<string, { qos: 0 | 1 | 2 }> = { [`${this.base}/sys/exe`]: { qos: 2 } };
    for (const [sub, qos] of Object.entries(this.subscriptions())) topics[`${this.base}/${sub}`] = { qos };
    client.subscribe(topics);
    void this.publish('status', 'online', 1, true);
    void this.publishSettings();
    if (this.bootReason) {
      void this.sendLog(`boot fw=${this.fwVersion} reason=${this.bootReason}`);
      this.bootReason = '';
    }
    if (!this.heartbeatTask) this.scheduleHeartbeat(true);
    this.onConnected(sessionPresent);
  }

  private scheduleHeartbeat(firstAfterConnect: boolean): void {
    const period = (this.opts.heartbeatSec ?? 300) * 1000;
    // The first heartbeat comes a random part of a period after connecting, so a pool's
    // devices spread their heartbeats instead of sending them all at once.
    const wait = firstAfterConnect ? Math.floor(Math.random() * period) + 1 : period;
    this.heartbeatTask = this.clock.at(this.clock.now() + wait, () => {
      this.heartbeatTask = undefined;
      if (this.state === 'stopped' || this.state === 'factory_reset' || this.state === 'rebooting') return;
      if (this.connected) void this.sendHeartbeat();
      this.scheduleHeartbeat(false);
    });
  }

  /** Sends `tele/heartbeat` now. */
  sendHeartbeat(): Promise<void> {
    const body = { uptime_s: this.uptimeSec(), rssi_dbm: -45 - randomInt(40), heap_free: 96_000 + randomInt(24_000) };
    return this.publish('tele/heartbeat', JSON.stringify(body), 0);
  }

  /** Runs one command line as if it had arrived on sys/exe (commands run one at a time). */
  execute(line: string): Promise<void> {
    return this.enqueueCommand(line);
  }

  private enqueueCommand(line: string): Promise<void> {
    const run = this.commandChain.then(() => this.handleCommand(line));
    this.commandChain = run.catch(() => undefined);
    return run;
  }

  private refuses(verb: string): boolean {
    const r = this.misbehaviour.refuse;
    return r === true || (Array.isArray(r) && r.includes(verb));
  }

  private async handleCommand(line: string): Promise<void> {
    const cmd = parseSysCommand(line);
    const known = KNOWN_COMMON.has(cmd.verb) || this.isProductVerb(cmd.verb);
    if (!known) return this.sendAck(ackLine(line, 'unknown'));
    const pre = this.precheck(cmd);
    if (pre !== undefined) return this.sendAck(pre);
    if (this.refuses(cmd.verb)) return this.sendAck(ackLine(line, 'failed', this.misbehaviour.refuseReason));
    const productAck = this.isProductVerb(cmd.verb) ? await this.productVerb(cmd) : undefined;
    if (productAck !== undefined) return this.sendAck(productAck);
    switch (cmd.verb) {
      case 'query':
        await this.sendAck(ackLine(line, 'ok'));
        await this.publishSettings();
        return;
      case 'reboot':
        await this.sendAck(ackLine(line, 'ok'));
        await this.sendLog('rebooting');
        void this.restart({ reason: 'reboot' }).catch((err: Error) => this.reportError(err));
        return;
      case 'set':
        return this.sendAck(this.setVerb(cmd));
      case 'addfile':
      case 'setcert':
        return this.sendAck(await this.fileVerb(cmd));
      case 'rmfile': {
        const name = arg(cmd, 'name');
        if (!name) return this.sendAck(ackLine(line, 'failed', 'missing name'));
        const index = this.files.findIndex((f) => f.name === name);
        if (index < 0) return this.sendAck(ackLine(line, 'failed', 'no such file'));
        this.files.splice(index, 1);
        return this.sendAck(ackLine(line, 'ok'));
      }
      case 'ota_update': {
        const name = arg(cmd, 'name');
        if (!name || !arg(cmd, 'url') || !/^[0-9a-fA-F]{64}$/.test(arg(cmd, 'sha256') ?? '')) return this.sendAck(ackLine(line, 'failed', 'bad arguments'));
        if (!this.opts.acceptOta) return this.sendAck(ackLine(line, 'failed', 'signature invalid'));
        await this.sendAck(ackLine(line, 'ok'));
        this.fwVersion = name.replace(/\.bin$/i, '');
        void this.restart({ reason: 'ota' }).catch((err: Error) => this.reportError(err));
        return;
      }
      case 'clearsettings':
        this.activeSettings = {};
        this.pendingSettings = {};
        return this.sendAck(ackLine(line, 'ok'));
      case 'formatfs':
        this.files = [];
        return this.sendAck(ackLine(line, 'ok'));
      case 'factory_reset':
        await this.sendAck(ackLine(line, 'ok'));
        await this.factoryReset();
        return;
      default:
        return this.sendAck(ackLine(line, 'unknown'));
    }
  }

  private setVerb(cmd: SysCommand): string {
    const pair = cmd.args[0];
    if (cmd.args.length !== 1 || !pair || !pair[0] || pair[1] === undefined) return ackLine(cmd.line, 'failed', 'bad arguments');
    const [key, raw] = pair;
    let value: SettingValue = coerce(raw);
    if (isSecretSettingKey(key) && (this.opts.enc ?? true)) {
      if (!raw.startsWith('enc1:')) return ackLine(cmd.line, 'failed', 'secret not encrypted');
      if (this.settingsKey) {
        try {
          value = openSetting(this.settingsKey, this.deviceId, key, raw);
        } catch {
          return ackLine(cmd.line, 'failed', 'decrypt failed');
        }
      } else value = raw;
    }
    if (this.opts.immediateKeys?.includes(key)) {
      this.activeSettings[key] = value;
      return ackLine(cmd.line, 'applied');
    }
    this.pendingSettings[key] = value;
    return ackLine(cmd.line, 'ok');
  }

  private async fileVerb(cmd: SysCommand): Promise<string> {
    const name = arg(cmd, 'name');
    const sha256 = arg(cmd, 'sha256');
    const url = arg(cmd, 'url');
    if (!name || !url || !sha256 || !/^[0-9a-fA-F]{64}$/.test(sha256)) return ackLine(cmd.line, 'failed', 'bad arguments');
    let size = 0;
    if (this.opts.fetchFiles) {
      await this.sendLog(`downloading ${name}`);
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
        if (!res.ok) return ackLine(cmd.line, 'failed', `download http ${res.status}`);
        const body = Buffer.from(await res.arrayBuffer());
        if (createHash('sha256').update(body).digest('hex') !== sha256.toLowerCase()) return ackLine(cmd.line, 'failed', 'sha256 mismatch');
        size = body.length;
      } catch (err) {
        return ackLine(cmd.line, 'failed', `download ${(err as Error).name === 'TimeoutError' ? 'timeout' : 'error'}`);
      }
    } else {
      size = parseInt(sha256.slice(0, 4), 16) + 1024;
    }
    const existing = this.files.find((f) => f.name === name);
    if (existing) existing.size = size;
    else this.files.push({ name, size });
    return ackLine(cmd.line, 'ok');
  }

  private async factoryReset(): Promise<void> {
    const client = this.client;
    this.state = 'factory_reset';
    this.halt();
    this.client = undefined;
    this.password = undefined;
    this.settingsKey = undefined;
    this.activeSettings = {};
    this.pendingSettings = {};
    this.files = [];
    if (client) this.endClient(client);
    this.emit('factory_reset');
  }
}

const KNOWN_COMMON = new Set(['query', 'reboot', 'set', 'addfile', 'setcert', 'rmfile', 'ota_update', 'clearsettings', 'formatfs', 'factory_reset']);

function coerce(raw: string): SettingValue {
  if (/^-?(0|[1-9][0-9]{0,14})(\.[0-9]+)?$/.test(raw)) return Number(raw);
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  return raw;
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export type { AckResult };
