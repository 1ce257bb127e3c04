import { AnswerWriter, bodyHead, bodyTail, latin1, numberText } from './answer-writer';
import type { BucketEnergy } from './day-energy';
import { LABEL_BYTES, labelWriter, type Bucket } from './energy';
import { round6 } from './record';

/**
 * An energy answer's body written as bytes (AnswerWriter): its points, up to 1999 of them, go
 * straight into the answer; the few other members go through JSON.stringify. The bytes are those
 * JSON.stringify writes of the points as objects (test/energy-answer.test.ts holds it to that),
 * for about half the CPU and without an object, a label string and a number's text per point
 * (bench/README.md, meter). Pure.
 *
 * A point is `{"start_at": <the bucket's label>, "energy_wh": <Wh or null>, "reset": <bool>}`:
 * energy null where no record of the bucket carried a counter reading, reset true where one was
 * flagged energy_reset.
 */

const MINUS = 0x2d;
const DOT = 0x2e;
const COMMA = 0x2c;
const OPEN = 0x5b;
const CLOSE = 0x5d;

const POINT = {
  startAt: latin1('{"start_at":"'),
  energy: latin1('","energy_wh":'),
  reset: latin1(',"reset":'),
  null: latin1('null'),
  resetEnd: latin1('true}'),
  noResetEnd: latin1('false}'),
};

/** Bytes a point takes at most: keys, a comma, the label, an energy (25), the flag. */
const POINT_BYTES = 80 + LABEL_BYTES;

/** Whole micro-watt-hours up to this are written from their digits (fifteen at most: see wattHours). */
const EXACT_DIGITS_BELOW = 1e15;

class EnergyAnswerWriter extends AnswerWriter {
  private readonly label = labelWriter();

  points(buckets: readonly Bucket[], sums: readonly BucketEnergy[]): void {
    this.reserve(1);
    this.byte(OPEN);
    let next = 0;
    for (let i = 0; i < buckets.length; i += 1) {
      this.reserve(POINT_BYTES);
      if (i > 0) this.byte(COMMA);
      this.copy(POINT.startAt);
      this.o = this.label(buckets[i] as Bucket, this.out, this.o);
      this.copy(POINT.energy);
      // Sums come in bucket order; a bucket without one has no record with energy.
      while ((sums[next]?.index ?? i) < i) next += 1;
      const sum = sums[next]?.index === i ? (sums[next] as BucketEnergy).energy : null;
      if (sum && sum.n > 0) this.wattHours(sum.uwh);
      else this.copy(POINT.null);
      this.copy(POINT.reset);
      this.copy(sum && sum.resets > 0 ? POINT.resetEnd : POINT.noResetEnd);
    }
    this.reserve(1);
    this.byte(CLOSE);
  }

  /**
   * Whole micro-watt-hours as watt-hours, as JSON.stringify writes round6(Number(uwh) / 1e6).
   * Below 1e15 µWh that number is the decimal uwh / 10^6 itself (a decimal of fifteen significant
   * digits or fewer reads back to the same digits, and JSON writes no exponent from 1e-6 to 1e21),
   * so its digits are written with the point put in and trailing zeros left out; beyond, through
   * the number.
   */
  private wattHours(uwh: bigint): void {
    const u = Number(uwh);
    if (!(Math.abs(u) < EXACT_DIGITS_BELOW)) {
      this.text(numberText(round6(u / 1e6)));
      return;
    }
    if (u < 0) this.byte(MINUS);
    const abs = Math.abs(u);
    let micro = abs % 1e6;
    this.digits((abs - micro) / 1e6);
    if (micro === 0) return;
    this.byte(DOT);
    for (let unit = 100_000; micro !== 0; unit /= 10) {
      const digit = Math.floor(micro / unit);
      this.byte(0x30 + digit);
      micro -= digit * unit;
    }
  }
}

/**
 * The body `{...before, "points": [...], ...after}`: a point per bucket, in order; `sums` are the
 * buckets with energy, by ascending index (as domain/day-energy.ts gives them).
 */
export function writeEnergyAnswer(before: Record<string, unknown>, buckets: readonly Bucket[], sums: readonly BucketEnergy[], after: Record<string, unknown>): Buffer {
  const writer = new EnergyAnswerWriter(buckets.length * 96 + 1024);
  writer.utf8(bodyHead(before, 'points'));
  writer.points(buckets, sums);
  writer.utf8(bodyTail(after));
  return writer.finish();
}
