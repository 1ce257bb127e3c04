/**
 * The evaluation cycle (spec, Configuration rule 5; Light commands rule 4). Every period, the
 * cycle's shards are shared by the replicas (store/evaluation.ts): for each device of a shard,
 * each sensor's metrics over its recent readings run through its profile's rules, the device's
 * level follows from its sensors' (domain/levels.ts), and levels, the shard's completion and
 * the partners' alert.level_changed events (one per light whose level changed) commit together.
 * Then light1 is written where it is due: the level changed, the signal changed, or an hour
 * passed since the last write; never while the light's automation is off.
 */
import { randomUUID } from 'node:crypto';
import type { AutomationWriter } from '@fleet/light-client';
import type { DeviceLookup } from '@fleet/registry-client';
import type { Logger } from '@fleet/service-kit';
import { payloadsOf } from '../domain/documents';
import { deviceLevel, signalKeyOf, type Level, type SignalKey } from '../domain/levels';
import { evaluatedSensor, evaluateRules, metricsOf } from '../domain/metrics';
import { defaultProfile, defaultSignal, profilesById, signalsById, type ProfileRow } from '../store/documents';
import * as evaluation from '../store/evaluation';
import type { ConfigDb } from '../store/prisma';
import { pruneReadings } from '../store/readings';

export interface CycleSettings {
  periodMs: number;
  shards: number;
  /** How long a replica holds a shard before another may take it over. */
  leaseMs: number;
  /** The window metrics look back over. */
  windowMs: number;
  /** Readings older than this are dropped. */
  retentionMs: number;
  /** How long one automation write (and one registry lookup) may take. */
  callTimeoutMs: number;
}

export interface CycleDeps {
  db: ConfigDb;
  lights: AutomationWriter;
  registry: DeviceLookup;
  logger: Logger;
  settings: CycleSettings;
  /** This replica's name in shard claims. */
  owner?: string;
  /** The outbox relay, told when a cycle committed alert.level_changed events (it publishes them now rather than at its next poll). */
  relay?: { nudge(): void };
  now?: () => Date;
}

const HOUR_MS = 3_600_000;
/** Automation writes sent at once; the automation switch is read again before each such group. */
const WRITES_IN_FLIGHT = 16;

class LeaseLost extends Error {}

/** Milliseconds spent in each phase of a shard, for the shard's log line. */
function phaseTimer(): ((phase: string) => void) & { all: () => Record<string, number> } {
  const spent: Record<string, number> = {};
  let last = performance.now();
  const took = (phase: string) => {
    const at = performance.now();
    spent[phase] = Math.round(at - last);
    last = at;
  };
  return Object.assign(took, { all: () => spent });
}

export class EvaluationCycle {
  readonly owner: string;
  private readonly now: () => Date;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly deps: CycleDeps) {
    this.owner = deps.owner ?? randomUUID();
    this.now = deps.now ?? (() => new Date());
  }

  /** Evaluates whatever the current cycle still has to do, now and then on every tick. */
  start(): void {
    const tickMs = Math.max(100, Math.min(5000, Math.floor(this.deps.settings.periodMs / 4)));
    const tick = () => {
      if (this.stopped) return;
      this.running = this.runOnce()
        .catch((err) => this.deps.logger.error({ err }, 'evaluation failed; the next tick retries'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, tickMs);
        });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** The cycle a moment belongs to. */
  cycleAt(at: Date): bigint {
    return BigInt(Math.floor(at.getTime() / this.deps.settings.periodMs));
  }

  /** Claims and evaluates the current cycle's shards until none is left to claim. */
  async runOnce(): Promise<void> {
    const { db, settings } = this.deps;
    const cycle = this.cycleAt(this.now());
    await evaluation.openCycle(db, cycle, settings.shards);
    for (;;) {
      if (this.stopped) return;
      const shard = await evaluation.claimShard(db, cycle, this.owner, settings.leaseMs);
      if (shard === undefined) return;
      if (shard === 0) await this.housekeeping(cycle);
      try {
        await this.evaluateShard(cycle, shard);
      } catch (err) {
        if (!(err instanceof LeaseLost)) throw err;
        this.deps.logger.warn({ cycle: String(cycle), shard }, 'shard taken over by another replica; its work was not committed');
      }
    }
  }

  private async housekeeping(cycle: bigint): Promise<void> {
    const now = this.now();
    const started = performance.now();
    await evaluation.pruneCycles(this.deps.db, cycle - 100n);
    const pruned = await pruneReadings(this.deps.db, new Date(now.getTime() - this.deps.settings.retentionMs));
    this.deps.logger.debug({ cycle: String(cycle), pruned, ms: Math.round(performance.now() - started) }, 'readings past retention dropped');
  }

  private async evaluateShard(cycle: bigint, shard: number): Promise<void> {
    const { db, settings, logger } = this.deps;
    const now = this.now();
    const took = phaseTimer();
    const devices = await evaluation.devicesOfShard(db, shard, settings.shards);
    took('list');
    const sensors = await evaluation.summarizeSensors(db, devices, new Date(now.getTime() - settings.windowMs));
    took('metrics');
    const profiles = await this.profilesFor(sensors.map((s) => s.profileId));
    const sensorLevels = new Map<string, Level[]>(devices.map((d) => [d, []]));
    const changedSensors: Array<{ deviceId: string; tdlId: string; level: Level }> = [];
    const evaluated = new Map<string, Array<ReturnType<typeof evaluatedSensor>>>();
    for (const s of sensors) {
      const profile = (s.profileId !== null ? profiles.byId.get(s.profileId) : undefined) ?? profiles.fallback;
      const metrics = metricsOf(s, now);
      const level = evaluateRules(profile.rules, profile.defaultLevel, metrics);
      sensorLevels.get(s.deviceId)?.push(level);
      if (level !== s.level) changedSensors.push({ deviceId: s.deviceId, tdlId: s.tdlId, level });
      const report = evaluatedSensor(s, level, metrics);
      const reports = evaluated.get(s.deviceId);
      if (reports) reports.push(report);
      else evaluated.set(s.deviceId, [report]);
    }
    const deviceLevels = [...sensorLevels].map(([deviceId, levels]) => ({ deviceId, level: deviceLevel(levels) }));
    const sensorsOf = (deviceId: string) => [...(evaluated.get(deviceId) ?? [])].sort((a, b) => (a.tdl_id < b.tdl_id ? -1 : a.tdl_id > b.tdl_id ? 1 : 0));
    took('rules');
    // The levels, the shard's completion and the partners' alert.level_changed events commit together.
    const changes = await db.$transaction(async (tx) => {
      if (!(await evaluation.completeShard(tx, cycle, shard, this.owner, devices.length))) throw new LeaseLost();
      await evaluation.saveSensorLevels(tx, changedSensors);
      const changed = await evaluation.saveDeviceLevels(tx, cycle, deviceLevels, now);
      await evaluation.clearPending(tx, devices);
      await evaluation.recordLevelChanges(tx, changed, sensorsOf, now);
      return changed.length;
    });
    if (changes > 0) this.deps.relay?.nudge();
    took('commit');
    const writes = await this.writeDue(devices, cycle);
    took('writes');
    await evaluation.settleShard(db, cycle, shard, writes);
    logger.debug({ cycle: String(cycle), shard, devices: devices.length, sensors: sensors.length, writes, ms: took.all() }, 'shard evaluated');
  }

  private async profilesFor(ids: Array<number | null>): Promise<{ byId: Map<number, ProfileRow>; fallback: ProfileRow }> {
    const wanted = [...new Set(ids.filter((id): id is number => id !== null))];
    const [byId, fallback] = await Promise.all([profilesById(this.deps.db, wanted), defaultProfile(this.deps.db)]);
    return { byId, fallback };
  }

  /** The hourly pass's slot of a cycle (store/evaluation.ts, HourlySlot). */
  private hourlySlot(cycle: bigint, now: Date): evaluation.HourlySlot {
    const { periodMs } = this.deps.settings;
    const slots = Math.max(1, Math.floor(HOUR_MS / periodMs));
    return { slots, current: Number(cycle % BigInt(slots)), writtenBefore: new Date(Number(cycle) * periodMs), hourAgo: new Date(now.getTime() - HOUR_MS) };
  }

  /**
   * Writes light1 where it is due and automation is on; a write that fails stays due for the
   * next cycle. Resolves with the number of writes that went out.
   */
  async writeDue(deviceIds: string[], cycle: bigint): Promise<number> {
    const { db, registry, lights, logger, settings } = this.deps;
    const now = this.now();
    const due = await evaluation.dueWrites(db, deviceIds, this.hourlySlot(cycle, now));
    if (due.length === 0) return 0;
    const call = () => ({ requestId: `automation-${randomUUID()}`, deadline: Date.now() + settings.callTimeoutMs });
    const described = new Map((await registry.lookupDevices(call(), due.map((d) => d.deviceId))).map((d) => [d.device_id, d]));
    const signalIds = [...new Set(due.flatMap((d) => (d.signalId === null ? [] : [d.signalId])))];
    const [signals, fallback] = await Promise.all([signalsById(db, signalIds), defaultSignal(db)]);
    const payloads = new Map<number, Record<SignalKey, string>>();
    const payloadOf = (signalId: number | null, level: Level): string => {
      const signal = (signalId !== null ? signals.get(signalId) : undefined) ?? fallback;
      if (!payloads.has(signal.id)) payloads.set(signal.id, payloadsOf(signal.entries));
      return payloads.get(signal.id)![signalKeyOf(level)];
    };
    const automated = (d: evaluation.WriteCandidate, devices: Map<string, { product: string | null; automation_enabled: boolean }>) => {
      const device = devices.get(d.deviceId);
      return device !== undefined && device.product === 'light' && device.automation_enabled;
    };
    const written: evaluation.WrittenLight[] = [];
    const write = async (d: evaluation.WriteCandidate) => {
      const payload = payloadOf(d.signalId, d.level);
      try {
        const sent = await lights.writeAutomation(call(), d.deviceId, payload);
        written.push({ deviceId: d.deviceId, level: d.level, payload, at: new Date(sent.sent_at), requests: d.requests });
      } catch (err) {
        logger.warn({ device_id: d.deviceId, err: (err as Error).message }, 'automation write failed; the next cycle retries');
      }
    };
    // WRITES_IN_FLIGHT at a time. Before each group after the first, the switch is read again:
    // a partner who turns automation off (and then commands light1 itself) is overwritten by
    // at most the group in flight, however many writes the shard has due.
    const writable = due.filter((d) => automated(d, described));
    for (let from = 0; from < writable.length; from += WRITES_IN_FLIGHT) {
      let group = writable.slice(from, from + WRITES_IN_FLIGHT);
      if (from > 0) {
        try {
          const current = new Map((await registry.lookupDevices(call(), group.map((d) => d.deviceId))).map((d) => [d.device_id, d]));
          group = group.filter((d) => automated(d, current));
        } catch (err) {
          logger.warn({ err: (err as Error).message, left: writable.length - from }, 'reading the automation switch failed; the writes left wait for the next cycle');
          break;
        }
      }
      await Promise.all(group.map(write));
    }
    // Recorded together once the shard's writes are over; should the replica stop before that,
    // the next cycle sends the same payloads again, which leaves the lights as they are.
    await evaluation.recordWrites(db, written);
    return written.length;
  }
}
