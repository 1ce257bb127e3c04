/** The pure planning step of ingest (domain/ingest-plan.ts): what is new, its flags, what changes around it. */
import { planIngest, RANGE_GAP, streamsAndRanges, withoutRepeats, type StoredNeighbour } from '../src/domain/ingest-plan';
import { parseRecord, type ParsedRecord } from '../src/domain/record';

const DEV = '0123456789AB';
const SID = '0a1b2c3d';
const received = new Date('2026-06-01T12:00:00Z');

/** A good record of the stream whose counter goes from first to last (null: the meter read no counter). */
function record(seq: number, first: number | null, last: number | null, ct = 1): ParsedRecord {
  const start = Date.parse('2026-06-01T00:00:00Z') / 1000 + seq * 900;
  const e = first === null || last === null ? null : [first, last];
  const payload = { sid: SID, seq, start, clock: 'synced', dur: 900, n: 900, err: 0, v: [230, 229, 231], i: [1, 0.5, 2], p: [230, 100, 400], f: [50, 49.9, 50.1], pf: [0.97, 0.9, 0.99], e, ct, alarms: 0, partial: false };
  return parseRecord(DEV, Buffer.from(JSON.stringify(payload)), received);
}

/** A stored record as the store reads it around a range ('p' carries the stream's last reading up to it). */
function stored(
  seq: number,
  first: number | null,
  last: number | null,
  role: StoredNeighbour['role'],
  flags: { reset?: boolean; ct?: number; counterBefore?: number | null } = {},
): StoredNeighbour {
  const counterBefore = role === 'p' ? (last ?? flags.counterBefore ?? null) : null;
  return { d: DEV, s: SID, seq: BigInt(seq), arrival_seq: BigInt(1000 + seq), quarantined: false, e_first_raw: first, e_last_raw: last, ct_turns: flags.ct ?? 1, energy_reset: flags.reset ?? false, meter_reconfigured: false, role, counter_before: counterBefore };
}

describe('ingest planning', () => {
  it('keeps the first copy of a repeated record', () => {
    const a = record(1, 0, 10);
    const { records, repeats } = withoutRepeats([a, record(1, 5, 6), record(2, 10, 20)]);
    expect(repeats).toBe(1);
    expect(records.map((r) => [r.seq, r.eFirstRaw])).toEqual([[1, 0], [2, 10]]);
  });

  it('reads the neighbours of runs of seqs, a new run after a gap', () => {
    const { ranges } = streamsAndRanges([record(5, 0, 1), record(3, 0, 1), record(5 + RANGE_GAP + 1, 0, 1)]);
    expect(ranges).toEqual([
      { d: DEV, s: SID, lo: 3, hi: 5 },
      { d: DEV, s: SID, lo: 5 + RANGE_GAP + 1, hi: 5 + RANGE_GAP + 1 },
    ]);
  });

  it('flags a new record against the stored one before it, and skips what is stored already', () => {
    const { streams } = streamsAndRanges([record(2, 90, 100), record(3, 100, 110)]);
    const plan = planIngest(streams, [stored(1, 0, 120, 'p'), stored(3, 100, 110, 'r')]);
    expect(plan.fresh.map((f) => [f.record.seq, f.derived.energyReset, f.derived.energyUsedWh])).toEqual([[2, true, 10]]);
    expect(plan.successorUpdates).toEqual([]);
  });

  it('sees a reset behind records without a counter reading, stored or new', () => {
    // Stored 1 read 0→100 and stored 2 read no counter: a new 3 starting at 3 went backwards.
    const behindStored = planIngest(streamsAndRanges([record(3, 3, 10)]).streams, [stored(2, null, null, 'p', { counterBefore: 100 })]);
    expect(behindStored.fresh.map((f) => [f.record.seq, f.derived.energyReset])).toEqual([[3, true]]);
    // The same within one batch of new records.
    const allNew = planIngest(streamsAndRanges([record(1, 0, 100), record(2, null, null), record(3, 3, 10), record(4, 10, 20)]).streams, []);
    expect(allNew.fresh.map((f) => [f.record.seq, f.derived.energyReset])).toEqual([
      [1, false],
      [2, false],
      [3, true],
      [4, false],
    ]);
  });

  it('recomputes a stored record whose last reading before it is a late one, across one without a reading', () => {
    // Stored 1 (0→50), 3 (no counter) and 4 (55→70, no reset after 50). A late 2 (50→60): 4 now
    // starts below 60, a reset.
    const plan = planIngest(streamsAndRanges([record(2, 50, 60), record(5, 70, 80)]).streams, [stored(1, 0, 50, 'p'), stored(3, null, null, 'r'), stored(4, 55, 70, 'r')]);
    expect(plan.fresh.map((f) => [f.record.seq, f.derived.energyReset])).toEqual([
      [2, false],
      [5, false],
    ]);
    expect(plan.successorUpdates).toEqual([{ arrival: 1004n, flags: { energyReset: true, meterReconfigured: false, energyUsedWh: 15 } }]);
  });

  it('recomputes the flags of a stored record a late one now precedes', () => {
    // Stored 1 (0→10) and 3 (5→15): 3 began below 1's last reading, a reset. A late 2 (10→5) takes
    // the reset itself (its counter went backwards); 3 now follows 5 and is no reset any more.
    const { streams } = streamsAndRanges([record(2, 10, 5)]);
    const plan = planIngest(streams, [stored(1, 0, 10, 'p'), stored(3, 5, 15, 'n', { reset: true })]);
    expect(plan.fresh.map((f) => [f.record.seq, f.derived.energyReset])).toEqual([[2, true]]);
    expect(plan.successorUpdates).toEqual([{ arrival: 1003n, flags: { energyReset: false, meterReconfigured: false, energyUsedWh: 10 } }]);
  });
});
