import { randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { SimClock, type Clock, type ScheduledTask } from './clock';
import { DeviceConnection, connectOptions } from './connection';
import { assertBrokerPassword, assertDeviceId, assertRootSecret, deriveBrokerPassword, deriveSettingsKey, isSecretSettingKey, type Product } from './credentials';
import { newStats, type DeviceMessage, type DeviceOptions, type DeviceState, type FileEntry, type Misbehaviour, type SettingValue, type SimStats } from './device-types';
import { MessageTraces } from './traces';
import { COMMON_VERBS, runCommonVerb, type VerbHost } from './verbs';
import { ackLine, parseSysCommand, type AckResult, type SysCommand } from '@fleet/device-protocol';

export * from './device-types';

const MASK = '*****';

/**
 * Behaviour both products share: credentials, will, status, sys/settings, heartbeat and the
 * system command verbs. Its parts: the MQTT connection (connection.ts), the common verbs
 * (verbs.ts) and what it sent and received (traces.ts). Events: `connect`, `disconnect`,
 * `received` (DeviceMessage), `sent` (DeviceMessage), `ack` (line), `boot`, `factory_reset`,
 * `error`.
 */
export abstract class SimulatedDevice extends EventEmitter {
  abstract readonly product: Product;
  readonly deviceId: string;
  readonly brokerUrl: string;
  readonly clock: Clock;
  readonly stats: SimStats;
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
  private readonly connection: DeviceConnection;
  private readonly traces: MessageTraces;
  private readonly verbHost: VerbHost;
  private password: string | undefined;
  private settingsKey: Buffer | undefined;
  private heartbeatTask: ScheduledTask | undefined;
  private commandChain: Promise<void> = Promise.resolve();
  private topicRootValue: string | undefined;
  private bootReason = 'power_on';

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
    this.traces = new MessageTraces(this, this.stats, this.clock, options.logLimit ?? 500);
    this.connection = new DeviceConnection(this.brokerUrl, {
      connected: (sessionPresent) => this.onLinkUp(sessionPresent),
      closed: () => this.onLinkDown(),
      refused: () => {
        this.stats.connectErrors++;
        this.state = 'stopped';
        this.halt();
      },
      error: (err) => this.reportError(err),
      message: (topic, payload, qos, retain) => this.onIncoming(topic, payload, qos, retain),
    });
    this.verbHost = this.makeVerbHost();
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

  /** The last messages received (up to `logLimit`). */
  get received(): DeviceMessage[] {
    return this.traces.received;
  }

  /** The last messages sent (up to `logLimit`). */
  get sent(): DeviceMessage[] {
    return this.traces.sent;
  }

  /** QoS 1 and 2 publishes still waiting for the broker's acknowledgement. */
  get unacknowledged(): number {
    return this.connection.unacknowledged;
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
    await this.connect();
  }

  /**
   * Stops. Clean by default: publishes `offline` (retained) and disconnects, so the broker
   * drops the will. With `dropWillOnDisconnect` (or `{ abrupt: true }`) the socket is killed
   * instead and the broker publishes the will.
   */
  async stop(options: { abrupt?: boolean } = {}): Promise<void> {
    this.halt();
    this.state = 'stopped';
    if (!this.connection.active) return;
    if (options.abrupt ?? this.misbehaviour.dropWillOnDisconnect) {
      this.connection.kill();
      return;
    }
    const sayGoodbye = this.connection.connected && !this.misbehaviour.silent;
    if (sayGoodbye) this.traces.record('sent', `${this.base}/status`, 'status', Buffer.from('offline'), 1, true);
    await this.connection.close(sayGoodbye ? { topic: `${this.base}/status`, payload: 'offline' } : undefined, this.opts.stopGraceMs ?? 3000);
  }

  /** Kills the socket without DISCONNECT (power loss): the broker publishes the will. Does not reconnect. */
  kill(): Promise<void> {
    return this.stop({ abrupt: true });
  }

  /** Power-cycles: socket killed (will fires), pending settings applied, reconnect after `offlineMs` real ms. */
  async restart(options: { offlineMs?: number; reason?: string } = {}): Promise<void> {
    if (this.state === 'factory_reset') throw new Error('factory reset: no credentials');
    this.halt();
    this.state = 'rebooting';
    this.connection.kill();
    await delay(options.offlineMs ?? this.opts.rebootDelayMs ?? 200);
    if (this.state !== 'rebooting') return;
    this.boot(options.reason ?? 'restart');
    await this.connect();
  }

  /** Resolves with the first message (already logged, or arriving later) that matches. */
  waitFor(direction: 'sent' | 'received', match: (m: DeviceMessage) => boolean, timeoutMs = 5000): Promise<DeviceMessage> {
    return this.traces.waitFor(direction, match, timeoutMs);
  }

  /** Resolves with the next message from now on that matches. */
  next(direction: 'sent' | 'received', match: (m: DeviceMessage) => boolean = () => true, timeoutMs = 5000): Promise<DeviceMessage> {
    return this.traces.next(direction, match, timeoutMs);
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

  /** Whether the device has a connection (connected or reconnecting) to publish on. */
  protected get linked(): boolean {
    return this.connection.active;
  }

  /** Publishes below the device's base topic; dropped (and counted as suppressed) while silent. Resolves true once acknowledged. */
  protected publish(sub: string, payload: string | Buffer, qos: 0 | 1 | 2, retain = false): Promise<boolean> {
    if (!this.connection.active || this.misbehaviour.silent) {
      this.stats.suppressed++;
      return Promise.resolve(false);
    }
    const buf = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
    const topic = `${this.base}/${sub}`;
    this.traces.record('sent', topic, sub, buf, qos, retain);
    return this.connection.publish(topic, buf, qos, retain);
  }

  /** 'error' events only reach listeners that asked for them; nobody listening is not a crash. */
  private reportError(err: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  protected sendAck(line: string): Promise<boolean> {
    this.stats.acks++;
    this.emit('ack', line);
    return this.publish('sys/resp', line, 1);
  }

  protected sendLog(text: string): Promise<boolean> {
    if (!this.misbehaviour.logLines) return Promise.resolve(false);
    return this.publish('sys/resp', `log>${text}`, 1);
  }

  protected publishSettings(): Promise<boolean> {
    return this.publish('sys/settings', JSON.stringify(this.settingsDocument()), 1);
  }

  // ---- life cycle ------------------------------------------------------------------------

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

  private halt(): void {
    this.connection.abandon();
    this.clock.cancel(this.heartbeatTask);
    this.heartbeatTask = undefined;
    this.onHalt();
  }

  private connect(): Promise<void> {
    this.state = 'connecting';
    return this.connection.open(connectOptions(this.opts, this.password, this.base));
  }

  private onLinkUp(sessionPresent: boolean): void {
    this.stats.connects++;
    this.state = 'online';
    // Subscribe after every connect, session or not: a session left by an earlier run under
    // another topic root would otherwise leave the device deaf.
    const topics: Record<string, { qos: 0 | 1 | 2 }> = { [`${this.base}/sys/exe`]: { qos: 2 } };
    for (const [sub, qos] of Object.entries(this.subscriptions())) topics[`${this.base}/${sub}`] = { qos };
    this.connection.subscribe(topics);
    void this.publish('status', 'online', 1, true);
    void this.publishSettings();
    if (this.bootReason) {
      void this.sendLog(`boot fw=${this.fwVersion} reason=${this.bootReason}`);
      this.bootReason = '';
    }
    if (!this.heartbeatTask) this.scheduleHeartbeat(true);
    this.onConnected(sessionPresent);
    this.emit('connect', sessionPresent);
  }

  private onLinkDown(): void {
    if (this.state !== 'online') return;
    this.stats.disconnects++;
    this.state = 'offline';
    this.emit('disconnect');
  }

  private onIncoming(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): void {
    const sub = topic.startsWith(`${this.base}/`) ? topic.slice(this.base.length + 1) : topic;
    this.traces.record('received', topic, sub, payload, qos, retain);
    if (sub === 'sys/exe') void this.enqueueCommand(payload.toString('utf8'));
    else this.onMessage(sub, payload);
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
  sendHeartbeat(): Promise<boolean> {
    const body = { uptime_s: this.uptimeSec(), rssi_dbm: -45 - randomInt(40), heap_free: 96_000 + randomInt(24_000) };
    return this.publish('tele/heartbeat', JSON.stringify(body), 0);
  }

  // ---- system commands -------------------------------------------------------------------

  /** Runs one command line as if it had arrived on sys/exe (commands run one at a time). */
  execute(line: string): Promise<void> {
    return this.enqueueCommand(line);
  }

  private enqueueCommand(line: string): Promise<void> {
    const run = this.commandChain.then(async () => {
      await this.handleCommand(line);
    });
    this.commandChain = run.catch(() => undefined);
    return run;
  }

  private refuses(verb: string): boolean {
    const r = this.misbehaviour.refuse;
    return r === true || (Array.isArray(r) && r.includes(verb));
  }

  /** Unknown verbs, product prechecks and the refusal switch first; then the product's verbs, then the common ones. */
  private async handleCommand(line: string): Promise<unknown> {
    const cmd = parseSysCommand(line);
    const known = COMMON_VERBS.has(cmd.verb) || this.isProductVerb(cmd.verb);
    if (!known) return this.sendAck(ackLine(line, 'unknown'));
    const pre = this.precheck(cmd);
    if (pre !== undefined) return this.sendAck(pre);
    if (this.refuses(cmd.verb)) return this.sendAck(ackLine(line, 'failed', this.misbehaviour.refuseReason));
    const productAck = this.isProductVerb(cmd.verb) ? await this.productVerb(cmd) : undefined;
    if (productAck !== undefined) return this.sendAck(productAck);
    return runCommonVerb(this.verbHost, cmd);
  }

  /** What the common verbs may see and change of this device: its live fields, not copies. */
  private makeVerbHost(): VerbHost {
    const host = {
      deviceId: this.deviceId,
      opts: this.opts,
      sendAck: (line: string) => this.sendAck(line),
      sendLog: (text: string) => this.sendLog(text),
      publishSettings: () => this.publishSettings(),
      reboot: (reason: string) => void this.restart({ reason }).catch((err: Error) => this.reportError(err)),
      factoryReset: () => this.factoryReset(),
    } as VerbHost;
    for (const field of ['settingsKey', 'files', 'fwVersion', 'activeSettings', 'pendingSettings'] as const) {
      Object.defineProperty(host, field, { enumerable: true, get: () => this[field], set: (value: never) => (this[field] = value) });
    }
    return host;
  }

  private async factoryReset(): Promise<void> {
    this.state = 'factory_reset';
    this.halt();
    this.password = undefined;
    this.settingsKey = undefined;
    this.activeSettings = {};
    this.pendingSettings = {};
    this.files = [];
    this.connection.kill();
    this.emit('factory_reset');
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export type { AckResult };
