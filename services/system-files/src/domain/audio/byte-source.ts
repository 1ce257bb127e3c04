/**
 * Bounded reads of a file: the check walks the stream front to back through a window of about
 * 1 MB, so a 32 MB upload is never held whole in memory.
 */
import type { FileHandle } from 'node:fs/promises';

export interface ByteSource {
  readonly size: number;
  /** Up to `length` bytes at `position` (fewer at the end of the source). */
  read(position: number, length: number): Promise<Uint8Array>;
}

export function fileSource(handle: FileHandle, size: number): ByteSource {
  return {
    size,
    async read(position, length) {
      const want = Math.max(0, Math.min(length, size - position));
      const buffer = Buffer.alloc(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await handle.read(buffer, got, want - got, position + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return buffer.subarray(0, got);
    },
  };
}

export const WINDOW_BYTES = 1 << 20;

/** A moving window over a source: `ensure` a range, then read its bytes synchronously. */
export class ByteWindow {
  private bytes: Uint8Array = new Uint8Array(0);
  private start = 0;

  constructor(
    readonly source: ByteSource,
    private readonly windowBytes = WINDOW_BYTES,
  ) {}

  /** Loads [position, position + length) clipped to the source; false when it is not all there. */
  async ensure(position: number, length: number): Promise<boolean> {
    const end = Math.min(position + length, this.source.size);
    if (position >= this.start && end <= this.start + this.bytes.length) return end === position + length;
    this.bytes = await this.source.read(position, Math.max(length, this.windowBytes));
    this.start = position;
    return end === position + length;
  }

  /** The loaded bytes and the source position of their first byte. */
  view(): { bytes: Uint8Array; start: number } {
    return { bytes: this.bytes, start: this.start };
  }

  /** The loaded bytes at [position, position + length); `ensure` them first. */
  slice(position: number, length: number): Uint8Array {
    const from = position - this.start;
    return this.bytes.subarray(from, from + length);
  }
}
