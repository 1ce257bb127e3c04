/**
 * Writing an answer's JSON as bytes, for answers made of many small, uniform parts (a page of
 * records, an energy answer's points): the parts go straight into one buffer kept from answer to
 * answer, with no object or string per part, and the answer is copied out once written. No I/O.
 *
 * The buffer is shared by every writer of the process: an answer is written synchronously, start
 * to end, before another begins. Answers run to about 0.6 MB (a 1000-record page); fresh buffers
 * of that size for every answer are external memory that sets off V8's full collections.
 */

let scratch = Buffer.alloc(0);

/** The smallest scratch buffer: every answer of the service fits without growing it. */
const SCRATCH_FLOOR = 4 << 20;

export const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');

/** JSON of a number as JSON.stringify writes it (a non-finite one is null). */
export const numberText = (x: number): string => (Number.isFinite(x) ? String(x) : 'null');

/** `{"a":1,"<key>":` of members {a: 1}: a body's text up to its array member `key`. */
export function bodyHead(members: Record<string, unknown>, key: string): string {
  const text = JSON.stringify(members).slice(1, -1);
  return `{${text ? `${text},` : ''}${JSON.stringify(key)}:`;
}

/** `,"b":2}` of members {b: 2}: a body's text after its array member. */
export function bodyTail(members: Record<string, unknown>): string {
  const text = JSON.stringify(members).slice(1, -1);
  return text ? `,${text}}` : '}';
}

/**
 * One answer being written. Callers reserve room before writing a part (writes past a Buffer's
 * end would be dropped silently), then write without checks.
 */
export class AnswerWriter {
  protected out: Buffer;
  protected o = 0;

  /** `expectedBytes`: about what the answer takes (it grows past that when needed). */
  constructor(expectedBytes: number) {
    if (scratch.length < expectedBytes) scratch = Buffer.allocUnsafeSlow(Math.max(expectedBytes, SCRATCH_FLOOR));
    this.out = scratch;
  }

  /** The answer written so far, copied out of the shared buffer. */
  finish(): Buffer {
    return Buffer.from(this.out.subarray(0, this.o));
  }

  /** Room for `n` more bytes. */
  reserve(n: number): void {
    if (this.o + n <= this.out.length) return;
    const grown = Buffer.allocUnsafeSlow(Math.max(this.out.length * 2, this.o + n));
    this.out.copy(grown, 0, 0, this.o);
    this.out = grown;
    scratch = grown;
  }

  byte(b: number): void {
    this.out[this.o++] = b;
  }

  copy(b: Buffer): void {
    const { out } = this;
    let o = this.o;
    for (let k = 0; k < b.length; k += 1) out[o++] = b[k] as number;
    this.o = o;
  }

  /** ASCII text (ISO times, numbers, labels). */
  text(s: string): void {
    const { out } = this;
    let o = this.o;
    for (let k = 0; k < s.length; k += 1) out[o++] = s.charCodeAt(k);
    this.o = o;
  }

  /** Any text (a body's head and tail); reserves its own room. */
  utf8(s: string): void {
    this.reserve(s.length * 3);
    this.o += this.out.write(s, this.o, 'utf8');
  }

  /** A whole number from 0 to 2^53 in decimal digits. */
  digits(n: number): void {
    let length = 1;
    for (let x = n; x >= 10; x = Math.floor(x / 10)) length += 1;
    const { out } = this;
    for (let k = this.o + length - 1; k >= this.o; k -= 1) {
      const rest = n % 10;
      out[k] = 0x30 + rest;
      n = (n - rest) / 10;
    }
    this.o += length;
  }
}
