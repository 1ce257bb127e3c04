import type { EventsTx } from './prisma';

/** A change of a device's place, at the stream position of the event that reported it. */
export interface NewPlaceChange {
  eventId: string;
  seq: number;
  deviceId: string;
  /** The node it left; null when it came into being (provisioned). */
  fromNode: number | null;
  /** The node it arrived in; null when it went away (removed). */
  toNode: number | null;
}

/** What the history says of a device at a stream position. */
export interface PlaceAt {
  /**
   * The node the device left at its first change after the position: where it was then; null
   * when that change brought it into being (it did not exist then). Undefined when no change
   * after the position is recorded: the device is where it is now.
   */
  before?: number | null;
  /** The position of the device's latest recorded change (null: none), to tell a stale answer of the registry. */
  latestSeq: number | null;
}

/** Records changes; one already recorded (a redelivered batch) is kept as it is. */
export async function recordPlaceChanges(db: EventsTx, rows: readonly NewPlaceChange[]): Promise<void> {
  if (rows.length === 0) return;
  await db.$executeRaw`
    INSERT INTO device_place_changes (event_id, seq, device_id, from_node, to_node)
    SELECT * FROM unnest(${rows.map((r) => r.eventId)}::text[], ${rows.map((r) => BigInt(r.seq))}::bigint[], ${rows.map((r) => r.deviceId)}::text[],
      ${rows.map((r) => r.fromNode)}::int[], ${rows.map((r) => r.toNode)}::int[])
    ON CONFLICT (event_id) DO NOTHING`;
}

/** For each (device, position): its first recorded change after the position, and its latest one. One statement for a whole batch. */
export async function placesAt(db: EventsTx, asked: ReadonlyArray<{ deviceId: string; seq: number }>): Promise<PlaceAt[]> {
  if (asked.length === 0) return [];
  const rows = await db.$queryRaw<Array<{ n: bigint; next_seq: bigint | null; from_node: number | null; latest_seq: bigint | null }>>`
    SELECT t.n, nxt.seq AS next_seq, nxt.from_node, latest.seq AS latest_seq
    FROM unnest(${asked.map((a) => a.deviceId)}::text[], ${asked.map((a) => BigInt(a.seq))}::bigint[]) WITH ORDINALITY AS t(device_id, seq, n)
    LEFT JOIN LATERAL (
      SELECT c.seq, c.from_node FROM device_place_changes c
      WHERE c.device_id = t.device_id AND c.seq > t.seq ORDER BY c.seq LIMIT 1) nxt ON true
    LEFT JOIN LATERAL (SELECT max(c.seq) AS seq FROM device_place_changes c WHERE c.device_id = t.device_id) latest ON true
    ORDER BY t.n`;
  return rows.map((r) => ({
    ...(r.next_seq !== null ? { before: r.from_node } : {}),
    latestSeq: r.latest_seq === null ? null : Number(r.latest_seq),
  }));
}

/** Deletes changes recorded before `before` (the stream holds no event older than they are); returns how many. */
export async function prunePlaceChanges(db: EventsTx, before: Date): Promise<number> {
  return (await db.placeChange.deleteMany({ where: { recordedAt: { lt: before } } })).count;
}
