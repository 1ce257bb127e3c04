/**
 * What one evaluation cycle reads and writes. A cycle is split into shards (devices by a hash of
 * their id); a replica claims a shard with a lease, evaluates it, and commits the levels and the
 * shard's completion together, so each device is evaluated once per cycle, and a shard whose
 * replica died is taken over when its lease runs out.
 */
import { recordPartnerEvents } from '@fleet/service-kit';
import type { Level } from '../domain/levels';
import type { ReadingSummary } from '../domain/metrics';
import type { ConfigTx } from './prisma';

/** Creates the cycle's shards (once, whichever replica comes first). */
export async function openCycle(db: ConfigTx, cycle: bigint, shards: number): Promise<void> {
  await db.$executeRaw`
    INSERT INTO cycle_shards (cycle, shard) SELECT ${cycle}, s FROM generate_series(0, ${shards - 1}) AS s
    ON CONFLICT (cycle, shard) DO NOTHING`;
}

/** Takes a shard nobody holds (or whose holder's lease ran out); undefined when none is left. */
export async function claimShard(db: ConfigTx, cycle: bigint, owner: string, leaseMs: number): Promise<number | undefined> {
  const rows = await db.$queryRaw<Array<{ shard: number }>>`
    UPDATE cycle_shards SET owner = ${owner}, claimed_at = now(), lease_until = now() + ${leaseMs} * interval '1 millisecond'
    WHERE (cycle, shard) = (
      SELECT cycle, shard FROM cycle_shards
      WHERE cycle = ${cycle} AND done_at IS NULL AND (lease_until IS NULL OR lease_until < now())
      ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING shard`;
  return rows[0]?.shard;
}

/** Marks the shard done if this replica still holds it; false when its lease was lost (nothing must be committed). */
export async function completeShard(tx: ConfigTx, cycle: bigint, shard: number, owner: string, devices: number): Promise<boolean> {
  const done = await tx.$executeRaw`
    UPDATE cycle_shards SET done_at = now(), devices = ${devices} WHERE cycle = ${cycle} AND shard = ${shard} AND owner = ${owner} AND done_at IS NULL`;
  return done === 1;
}

/** Records that the shard's light1 writes are over (how many went out): the cycle's timing, for operators and the benchmark. */
export async function settleShard(db: ConfigTx, cycle: bigint, shard: number, writes: number): Promise<void> {
  await db.$executeRaw`UPDATE cycle_shards SET settled_at = now(), writes = ${writes} WHERE cycle = ${cycle} AND shard = ${shard}`;
}

export async function pruneCycles(db: ConfigTx, before: bigint): Promise<void> {
  await db.$executeRaw`DELETE FROM cycle_shards WHERE cycle < ${before}`;
}

/**
 * The devices of a shard: the lights that ever had a sensor (and were not removed since). Every
 * light with a sensor; every one with an alert state (evaluated before: kept from its first
 * evaluation, NO_SENSORS once its sensors are gone); and every pending one (a sensor attached or
 * detached since a cycle last evaluated it, store/devices.ts detachSensor), which is how a light
 * whose only sensor was detached before its first evaluation is still evaluated. The pending
 * lights are only those changed since the last cycle (clearPending), so the listing stays a scan
 * of the same two tables as before plus a handful of rows, not of the fleet's devices.
 */
export async function devicesOfShard(db: ConfigTx, shard: number, shards: number): Promise<string[]> {
  const rows = await db.$queryRaw<Array<{ device_id: string }>>`
    SELECT device_id FROM (SELECT device_id FROM sensors UNION SELECT device_id FROM alert_states UNION SELECT device_id FROM pending_lights) d
    WHERE mod(abs(hashtext(device_id)::bigint), ${shards}) = ${shard}`;
  return rows.map((r) => r.device_id);
}

/**
 * Clears the pending mark of the devices a cycle evaluated, in the transaction that stores their
 * levels: each of them has an alert state once it commits, which keeps it among the devices
 * evaluated (a mark set meanwhile by an attach or a detach may go too, for the same reason).
 */
export async function clearPending(tx: ConfigTx, deviceIds: string[]): Promise<void> {
  if (deviceIds.length === 0) return;
  await tx.$executeRaw`DELETE FROM pending_lights WHERE device_id = ANY(${deviceIds}::bpchar[])`;
}

export interface SensorSummary extends ReadingSummary {
  deviceId: string;
  tdlId: string;
  profileId: number | null;
  level: string | null;
}

/**
 * Every sensor of the devices with its readings summarized over the window (metric definitions:
 * README). One index range scan per sensor reads the window: the run of breaches is the position
 * of the newest non-breach in the newest-first list of flags, and the newest reading is the head
 * of that list. Only a sensor with nothing in the window looks further back, for its newest reading.
 */
export async function summarizeSensors(db: ConfigTx, deviceIds: string[], since: Date): Promise<SensorSummary[]> {
  if (deviceIds.length === 0) return [];
  const rows = await db.$queryRaw<
    Array<{
      device_id: string;
      tdl_id: string;
      profile_id: number | null;
      level: string | null;
      count: number;
      breaches: number;
      consecutive: number;
      min_t: number | null;
      max_t: number | null;
      newest_at: Date | null;
      newest_breach: boolean | null;
      newest_temp: number | null;
      newest_humidity: number | null;
    }>
  >`
    SELECT s.device_id, s.tdl_id, s.profile_id, s.level,
           coalesce(w.count, 0)::int AS count, coalesce(w.breaches, 0)::int AS breaches, coalesce(w.consecutive, 0)::int AS consecutive,
           w.min_t, w.max_t,
           coalesce(w.newest_at, n.at) AS newest_at, coalesce(w.newest_breach, n.breach) AS newest_breach,
           CASE WHEN w.count > 0 THEN w.newest_temp ELSE n.temp_c END AS newest_temp,
           CASE WHEN w.count > 0 THEN w.newest_humidity ELSE n.humidity END AS newest_humidity
    FROM sensors s
    LEFT JOIN LATERAL (
      SELECT count(*) AS count, count(*) FILTER (WHERE r.breach) AS breaches, min(r.temp_c) AS min_t, max(r.temp_c) AS max_t,
             coalesce(array_position(array_agg(r.breach ORDER BY r.at DESC), false) - 1, count(*)) AS consecutive,
             max(r.at) AS newest_at, (array_agg(r.breach ORDER BY r.at DESC))[1] AS newest_breach,
             (array_agg(r.temp_c ORDER BY r.at DESC))[1] AS newest_temp, (array_agg(r.humidity ORDER BY r.at DESC))[1] AS newest_humidity
      FROM readings r WHERE r.device_id = s.device_id AND r.tdl_id = s.tdl_id AND r.at > ${since}) w ON true
    LEFT JOIN LATERAL (
      SELECT r.at, r.breach, r.temp_c, r.humidity FROM readings r
      WHERE w.count = 0 AND r.device_id = s.device_id AND r.tdl_id = s.tdl_id ORDER BY r.at DESC LIMIT 1) n ON true
    WHERE s.device_id = ANY(${deviceIds}::bpchar[])`;
  return rows.map((r) => ({
    deviceId: r.device_id,
    tdlId: r.tdl_id,
    profileId: r.profile_id,
    level: r.level,
    count: r.count,
    breaches: r.breaches,
    consecutiveBreaches: r.consecutive,
    minTempC: r.min_t,
    maxTempC: r.max_t,
    newest: r.newest_at ? { at: r.newest_at, breach: r.newest_breach === true, tempC: r.newest_temp, humidity: r.newest_humidity } : null,
  }));
}

/** Sensors whose level changed. */
export async function saveSensorLevels(tx: ConfigTx, changes: Array<{ deviceId: string; tdlId: string; level: Level }>): Promise<void> {
  if (changes.length === 0) return;
  await tx.$executeRaw`
    UPDATE sensors s SET level = c.level
    FROM unnest(${changes.map((c) => c.deviceId)}::text[], ${changes.map((c) => c.tdlId)}::text[], ${changes.map((c) => c.level)}::text[]) AS c(device_id, tdl_id, level)
    WHERE s.device_id = c.device_id AND s.tdl_id = c.tdl_id`;
}

/** A light whose level a cycle changed: `from` is null at its first evaluation. */
export interface LevelChange {
  deviceId: string;
  from: Level | null;
  to: Level;
}

/**
 * The devices' levels for this cycle. A device already evaluated in this cycle is left alone
 * (once per cycle); a changed level asks for a light1 write. Returns the devices whose level
 * changed, with the level they had: a light evaluated the first time gets its state here (from
 * null); the others' states are locked (in device order) and read before they are updated, so a
 * replica late with an earlier cycle's shard waits for this one instead of reading a level about
 * to change, and each change is reported by the one transaction that made it.
 */
export async function saveDeviceLevels(tx: ConfigTx, cycle: bigint, levels: Array<{ deviceId: string; level: Level }>, now: Date): Promise<LevelChange[]> {
  if (levels.length === 0) return [];
  const ids = levels.map((l) => l.deviceId);
  const values = levels.map((l) => l.level);
  const first = await tx.$queryRaw<Array<{ device_id: string; level: Level }>>`
    INSERT INTO alert_states (device_id, level, changed_at, evaluated_cycle, first_cycle, evaluations, write_needed)
    SELECT d.device_id, d.level, ${now}, ${cycle}, ${cycle}, 1, true
    FROM unnest(${ids}::text[], ${values}::text[]) AS d(device_id, level)
    ORDER BY d.device_id
    ON CONFLICT (device_id) DO NOTHING
    RETURNING device_id, level`;
  const prior = await tx.$queryRaw<Array<{ device_id: string; level: Level }>>`
    SELECT device_id, level FROM alert_states
    WHERE device_id = ANY(${ids}::bpchar[]) AND evaluated_cycle < ${cycle}
    ORDER BY device_id FOR UPDATE`;
  if (prior.length > 0) {
    await tx.$executeRaw`
      UPDATE alert_states a SET
        level = d.level,
        changed_at = CASE WHEN a.level = d.level THEN a.changed_at ELSE ${now} END,
        write_needed = a.write_needed OR a.level <> d.level,
        evaluated_cycle = ${cycle},
        evaluations = a.evaluations + 1
      FROM unnest(${ids}::text[], ${values}::text[]) AS d(device_id, level)
      WHERE a.device_id = d.device_id AND a.evaluated_cycle < ${cycle}`;
  }
  const levelOf = new Map(levels.map((l) => [l.deviceId, l.level]));
  return [
    ...first.map((r) => ({ deviceId: r.device_id, from: null, to: r.level })),
    ...prior.flatMap((r) => {
      const to = levelOf.get(r.device_id);
      return to !== undefined && to !== r.level ? [{ deviceId: r.device_id, from: r.level, to }] : [];
    }),
  ];
}

/** The partners' alert.level_changed events of a cycle's changes, in the transaction that stores the levels. */
export async function recordLevelChanges(tx: ConfigTx, changes: readonly LevelChange[], sensorsOf: (deviceId: string) => Array<{ tdl_id: string } & Record<string, unknown>>, at: Date): Promise<void> {
  await recordPartnerEvents(
    tx,
    changes.map((c) => ({ type: 'alert.level_changed' as const, deviceId: c.deviceId, occurredAt: at, data: { from: c.from, to: c.to, sensors: sensorsOf(c.deviceId) } })),
  );
}

export interface WriteCandidate {
  deviceId: string;
  level: Level;
  signalId: number | null;
  /** The light's count of rewrite requests when it was read (store/devices.ts, markForWrite). */
  requests: number;
}

/**
 * The hourly pass, spread over the hour: each light has a slot (a hash of its id) among the
 * cycles of an hour and is rewritten in the cycle of its slot, so each cycle carries about
 * 1/slots of the lights instead of all of them at once.
 */
export interface HourlySlot {
  /** Cycles in an hour (at least 1). */
  slots: number;
  /** The slot of this cycle. */
  current: number;
  /** A light written after this (in the current cycle already) is not rewritten for its slot. */
  writtenBefore: Date;
  /** A light not written since this (a slot missed) is rewritten whatever its slot. */
  hourAgo: Date;
}

/** Devices of the list whose light1 is due: a write asked for, its hourly slot, or none for an hour. */
export async function dueWrites(db: ConfigTx, deviceIds: string[], hourly: HourlySlot): Promise<WriteCandidate[]> {
  if (deviceIds.length === 0) return [];
  const rows = await db.$queryRaw<Array<{ device_id: string; level: string; signal_id: number | null; write_requests: number }>>`
    SELECT a.device_id, a.level, ds.signal_id, a.write_requests FROM alert_states a LEFT JOIN device_signals ds ON ds.device_id = a.device_id
    WHERE a.device_id = ANY(${deviceIds}::bpchar[]) AND (
      a.write_needed OR a.written_at IS NULL OR a.written_at < ${hourly.hourAgo}
      OR (a.written_at < ${hourly.writtenBefore} AND mod(abs(hashtext(a.device_id || '/hourly')::bigint), ${hourly.slots}) = ${hourly.current}))`;
  return rows.map((r) => ({ deviceId: r.device_id, level: r.level as Level, signalId: r.signal_id, requests: r.write_requests }));
}

export interface WrittenLight {
  deviceId: string;
  level: Level;
  payload: string;
  at: Date;
  /** The count of rewrite requests the write was chosen with (WriteCandidate.requests). */
  requests: number;
}

/**
 * Records writes (one statement for a shard's). A light keeps asking for a write when its level
 * changed meanwhile, or when a rewrite was requested after the write was chosen: a signal chosen,
 * edited or deleted while the cycle was writing the entry it read before.
 */
export async function recordWrites(db: ConfigTx, writes: WrittenLight[]): Promise<void> {
  if (writes.length === 0) return;
  await db.$executeRaw`
    UPDATE alert_states a SET write_needed = (a.level <> w.level OR a.write_requests <> w.requests), written_payload = w.payload, written_at = w.at
    FROM unnest(${writes.map((w) => w.deviceId)}::bpchar[], ${writes.map((w) => w.level)}::text[], ${writes.map((w) => w.payload)}::text[], ${writes.map((w) => w.at)}::timestamptz[], ${writes.map((w) => w.requests)}::int[])
      AS w(device_id, level, payload, at, requests)
    WHERE a.device_id = w.device_id`;
}
