import { randomBytes } from 'node:crypto';
import type { ScheduledTask } from './clock';
import type { Product } from './credentials';
import { SimulatedDevice, type DeviceOptions } from './device';
import { BAD_VALUE_KINDS, buildRecord, corrupt, defaultLoad, IntervalAcc, makeRead, round, type BadValueKind, type ClockMode, type IntervalRecord, type LinkState, type LoadProfile, type Read } from './meter-model';
import { ackLine, arg, readableToken, type SysCommand } from '@fleet/device-protocol';

export type SampleError = 'busy' | 'config_mode' | 'unsupported' | 'rejected' | 'no_snapshot';

export interface MeterOptions extends DeviceOptions {
  /** Interval length in simulated seconds (default 900). */
  intervalSec?: number;
  /** CT turns (default 1). Raw i, p and e are the true values multiplied by this. */
  ctTurns?: number;
  /** `synced` (default), `free` or `none`. */
  clockMode?: ClockMode;
  /** True load in W: a number (base of a daily profile; default random 100–2000) or a function of simulated time. */
  loadW?: number | LoadProfile;
  /** Lifetime counter at the first boot (Wh, raw; default random). */
  initialEnergyWh?: number;
  /** The unit's link to its meter (default ok); otherwise every read fails and counts in `err`. */
  link?: LinkState;
  /** How many closed records to keep in `records` (default 10000; pools use 0). */
  recordLimit?: number;

  // Misbehaviour
  /** Send every interval record twice (true), or each with this probability (0–1). */
  duplicateRecords?: boolean | number;
  /** Hold back some records and send them later, out of order: every `every`-th record (default 3) waits until `after` (default 2) newer records went out. */
  lateRecords?: boolean | { every?: number; after?: number };
  /** Send corrupted records: true cycles through every kind, or give the kinds to cycle through. */
  badValues?: boolean | BadValueKind[];
  /** Answer `sample>` with this error (or `no_answer`: stay quiet); null answers normally. */
  sampleError?: SampleError | 'no_answer' | null;
  /** Refuse `resetenergy` with `failed:<this reason>`. */
  resetEnergyFailure?: string | null;
  /** Default true. false: a restart keeps the sid and counts seq from 0 again (a firmware bug). */
  newSidOnRestart?: boolean;
}

/** A record as it went out. */
export interface SentRecord {
  record: IntervalRecord;
  payload: string;
  late: boolean;
  duplicate: boolean;
  bad?: BadValueKind;
  /** Set once the broker acknowledged it (PUBACK). A publish the MQTT client failed stays false: that record never reached the broker. */
  acknowledged: boolean;
}

/**
 * A single-phase energy meter: interval records on `<r>/iv` every `intervalSec` simulated
 * seconds (one read per simulated second), `report>`, `sample>` answered on `<r>/live`, and
 * `resetenergy>` with token bookkeeping.
 */
export class SimulatedMeter extends SimulatedDevice {
  readonly product: Product = 'meter';
  /** Raw lifetime counter (Wh, before CT correction). */
  energyWh: number;
  ctTurns: number;
  intervalSec: number;
  clockMode: ClockMode;
  link: LinkState;
  sid = '';
  /** The seq the next closed record gets. */
  seq = 0;
  /** Every closed record in seq order, as built (before any corruption), newest last. */
  readonly records: IntervalRecord[] = [];
  /** Every interval record sent, in sending order (duplicates and late ones included). */
  readonly sentRecords: SentRecord[] = [];
  /** Tokens of resets applied (kept across restarts; the newest 64). */
  readonly appliedResetTokens: string[] = [];
  readonly meterOpts: MeterOptions;
  private readonly load: LoadProfile;
  private pendingCt: number | undefined;
  private acc = new IntervalAcc();
  private intervalStart = 0;
  private nextReadAt = 0;
  private lastRead: Read | undefined;

  /** Whether the meter has read its meter since it booted (until then `sample>` answers `no_snapshot`). */
  get hasReading(): boolean {
    this.readUntilNow();
    return this.lastRead !== undefined;
  }
  private closeTask: ScheduledTask | undefined;
  private held: Array<{ rec: IntervalRecord; releaseAtSeq: number }> = [];
  private badIndex = 0;

  constructor(options: MeterOptions) {
    super(options);
    this.meterOpts = options;
    this.ctTurns = options.ctTurns ?? 1;
    this.intervalSec = options.intervalSec ?? 900;
    if (!Number.isInteger(this.intervalSec) || this.intervalSec < 1) throw new Error('intervalSec must be a positive whole number');
    this.clockMode = options.clockMode ?? 'synced';
    this.link = options.link ?? 'ok';
    this.energyWh = options.initialEnergyWh ?? Math.round(Math.random() * 500_000);
    const loadW = options.loadW ?? 100 + Math.random() * 1900;
    this.load = typeof loadW === 'function' ? loadW : defaultLoad(loadW);
    this.init({
      fwVersion: '1.9.4',
      settings: { interval_s: this.intervalSec, ct_turns: this.ctTurns, modbus_addr: 1, baud: 9600, ntp: this.clockMode === 'synced', api_token: 'tok-lab' },
      files: [],
    });
  }

  protected override isProductVerb(verb: string): boolean {
    return verb === 'report' || verb === 'sample' || verb === 'resetenergy';
  }

  protected override precheck(cmd: SysCommand): string | undefined {
    if (cmd.verb === 'resetenergy' && !readableToken(arg(cmd, 'token'))) return 'resetenergy>>failed:unreadable token';
    return undefined;
  }

  protected override productVerb(cmd: SysCommand): string | undefined {
    switch (cmd.verb) {
      case 'report':
        void this.report();
        return ackLine(cmd.line, 'ok');
      case 'sample': {
        const token = arg(cmd, 'token');
        if (!readableToken(token)) return ackLine(cmd.line, 'failed', 'unreadable token');
        void this.answerSample(token);
        return ackLine(cmd.line, 'ok');
      }
      case 'resetenergy': {
        const token = arg(cmd, 'token') as string;
        if (this.meterOpts.resetEnergyFailure) return ackLine(cmd.line, 'failed', this.meterOpts.resetEnergyFailure);
        if (this.appliedResetTokens.includes(token)) return ackLine(cmd.line, 'duplicate');
        this.resetEnergy();
        this.appliedResetTokens.push(token);
        if (this.appliedResetTokens.length > 64) this.appliedResetTokens.shift();
        return ackLine(cmd.line, 'ok');
      }
      default:
        return undefined;
    }
  }

  protected override onBoot(): void {
    const s = this.activeSettings;
    if (typeof s.ct_turns === 'number' && s.ct_turns >= 1) this.ctTurns = s.ct_turns;
    if (typeof s.interval_s === 'number' && Number.isInteger(s.interval_s) && s.interval_s >= 1) this.intervalSec = s.interval_s;
    if (this.pendingCt !== undefined) {
      this.ctTurns = this.pendingCt;
      this.pendingCt = undefined;
    }
    if (this.meterOpts.newSidOnRestart ?? true) this.sid = randomBytes(4).toString('hex');
    else this.sid ||= randomBytes(4).toString('hex');
    this.seq = 0;
    this.lastRead = undefined;
    // Reads fall on whole simulated seconds; the stream starts at the next one.
    this.startInterval(Math.ceil(this.clock.now() / 1000) * 1000);
  }

  protected override onHalt(): void {
    this.clock.cancel(this.closeTask);
    this.closeTask = undefined;
  }

  protected override onConnected(): void {
    // Records held back while offline went out through the client's queue; nothing to do.
  }

  /** CT turns for intervals that start from now on (the one in progress keeps its value). */
  setCtTurns(turns: number): void {
    if (!Number.isInteger(turns) || turns < 1) throw new Error('CT turns must be a positive whole number');
    this.pendingCt = turns;
    this.activeSettings.ct_turns = turns;
  }

  /** Closes the interval in progress now and sends it with `partial: true`. */
  report(): Promise<void> {
    const now = this.clock.now();
    this.closeEndedIntervals(now);
    const cut = this.intervalStart + Math.max(0, Math.floor((now - this.intervalStart) / 1000)) * 1000;
    return this.closeInterval(cut, true);
  }

  /** What the meter would answer on `<r>/live` for a sample now (without the token). */
  liveReading(): Record<string, unknown> {
    this.readUntilNow();
    const r = this.lastRead;
    const ageS = r ? round((this.clock.now() - r.at) / 1000, 1) : null;
    if (this.link !== 'ok') return { link: this.link, v: null, i: null, p: null, pf: null, f: null, ct: this.ctTurns, age_s: ageS };
    if (!r) return { error: 'no_snapshot' };
    return { link: 'ok', v: round(r.v, 1), i: round(r.i, 3), p: round(r.p, 1), pf: r.pf === null ? null : round(r.pf, 3), f: round(r.f, 2), ct: this.ctTurns, age_s: ageS };
  }

  /** Zeroes the lifetime counter now (reads up to now count before the reset). */
  resetEnergy(): void {
    this.readUntilNow();
    this.energyWh = 0;
  }

  /** Sends every held-back (late) record now. */
  async flushLate(): Promise<void> {
    const held = this.held;
    this.held = [];
    await Promise.all(held.map((h) => this.sendRecord(h.rec, true)));
  }

  /** Records held back by the late switch, not yet sent. */
  get heldRecords(): IntervalRecord[] {
    return this.held.map((h) => h.rec);
  }

  private async answerSample(token: string): Promise<void> {
    const err = this.meterOpts.sampleError;
    if (err === 'no_answer') return;
    const body = err ? { error: err } : this.liveReading();
    await this.publish('live', JSON.stringify({ token, ...body }), 1);
  }

  private startInterval(at: number): void {
    this.acc = new IntervalAcc();
    this.intervalStart = at;
    if (this.nextReadAt < at) this.nextReadAt = at;
    if (this.pendingCt !== undefined) {
      this.ctTurns = this.pendingCt;
      this.pendingCt = undefined;
    }
    this.clock.cancel(this.closeTask);
    this.closeTask = this.clock.at(at + this.intervalSec * 1000, () => {
      this.closeTask = undefined;
      void this.closeInterval(at + this.intervalSec * 1000, false);
    });
  }

  /** Takes every read due by now, each into the interval it falls in. */
  private readUntilNow(): void {
    const now = this.clock.now();
    this.closeEndedIntervals(now);
    this.readThrough(now);
  }

  /**
   * Closes every interval that ended by `now` but whose close task has not run yet. A shared
   * clock runs its tasks late under load (at high speed a few real milliseconds are many
   * simulated seconds); a meter closes its interval at the boundary, so a read taken after it
   * never lands in the interval before.
   */
  private closeEndedIntervals(now: number): void {
    while (this.closeTask && now >= this.intervalStart + this.intervalSec * 1000) {
      void this.closeInterval(this.intervalStart + this.intervalSec * 1000, false);
    }
  }

  /** Takes every read due at or before t (one per simulated second). */
  private readThrough(t: number): void {
    while (this.nextReadAt <= t) {
      const at = this.nextReadAt;
      this.nextReadAt += 1000;
      if (this.link !== 'ok') {
        this.acc.addError();
        continue;
      }
      const read = makeRead(at, this.load(at), this.ctTurns, this.energyWh);
      this.energyWh = read.e;
      this.lastRead = read;
      this.acc.addRead(read);
    }
  }

  private closeInterval(end: number, partial: boolean): Promise<void> {
    this.readThrough(end - 1);
    const durSec = Math.round((end - this.intervalStart) / 1000);
    const rec = buildRecord(this.acc, {
      sid: this.sid,
      seq: this.seq++,
      start: this.clockMode === 'synced' ? Math.round(this.intervalStart / 1000) : null,
      clock: this.clockMode,
      dur: durSec,
      ct: this.ctTurns,
      partial,
      ...(this.clockMode === 'free' ? { up: Math.round((this.intervalStart - this.bootAt) / 1000) } : {}),
    });
    this.startInterval(end);
    this.stats.records++;
    const limit = this.meterOpts.recordLimit ?? 10_000;
    if (limit > 0) {
      this.records.push(rec);
      if (this.records.length > limit) this.records.shift();
    }
    return this.dispatchRecord(rec);
  }

  private async dispatchRecord(rec: IntervalRecord): Promise<void> {
    const late = this.meterOpts.lateRecords;
    if (late) {
      const every = (typeof late === 'object' ? late.every : undefined) ?? 3;
      const after = (typeof late === 'object' ? late.after : undefined) ?? 2;
      if (rec.seq % every === every - 1) {
        this.held.push({ rec, releaseAtSeq: rec.seq + after });
        return;
      }
    }
    // Publishes are queued in call order, so the held records go out right after this one.
    const sends = [this.sendRecord(rec, false)];
    const due = this.held.filter((h) => h.releaseAtSeq <= rec.seq);
    if (due.length > 0) {
      this.held = this.held.filter((h) => h.releaseAtSeq > rec.seq);
      for (const h of due) sends.push(this.sendRecord(h.rec, true));
    }
    await Promise.all(sends);
  }

  private async sendRecord(rec: IntervalRecord, late: boolean): Promise<void> {
    if (this.misbehaviour.silent || !this.linked) {
      this.stats.suppressed++;
      return;
    }
    const out: IntervalRecord = this.clockMode === 'free' || rec.up !== undefined ? { ...rec, up_now: Math.round((this.clock.now() - this.bootAt) / 1000) } : rec;
    let bad: BadValueKind | undefined;
    const badOpt = this.meterOpts.badValues;
    if (badOpt) {
      const kinds = Array.isArray(badOpt) ? badOpt : BAD_VALUE_KINDS;
      bad = kinds[this.badIndex++ % kinds.length];
    }
    const payload = bad ? corrupt(out, bad) : JSON.stringify(out);
    const dupOpt = this.meterOpts.duplicateRecords;
    const dup = dupOpt === true || (typeof dupOpt === 'number' && Math.random() < dupOpt);
    const limit = this.meterOpts.recordLimit ?? 10_000;
    const send = async (duplicate: boolean) => {
      const sent: SentRecord = { record: out, payload, late, duplicate, ...(bad ? { bad } : {}), acknowledged: false };
      if (limit > 0) {
        this.sentRecords.push(sent);
        if (this.sentRecords.length > limit) this.sentRecords.shift();
      }
      if (this.listenerCount('record') > 0) this.emit('record', sent);
      sent.acknowledged = await this.publish('iv', payload, 1);
    };
    await Promise.all(dup ? [send(false), send(true)] : [send(false)]);
  }
}
