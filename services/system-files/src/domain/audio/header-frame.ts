/**
 * The header frame an encoder may put first in a Layer III stream: a frame of silence whose body
 * carries the stream's frame count (and byte count) so players know the duration without reading
 * every frame. "Xing" marks a variable-bitrate stream, "Info" the same structure for a constant
 * bitrate (LAME), "VBRI" the Fraunhofer encoder's variant.
 */
import type { FrameHeader } from './frame-header';

export interface HeaderFrame {
  kind: 'Xing' | 'Info' | 'VBRI';
  /** Audio frames in the stream, the header frame not included; null when the header leaves it out. */
  frames: number | null;
  /** Bytes of the stream as the encoder wrote it; null when the header leaves it out. */
  bytes: number | null;
}

const XING_FRAMES_FLAG = 0x1;
const XING_BYTES_FLAG = 0x2;
/** VBRI sits at a fixed place: right after the header and 32 bytes of side information. */
const VBRI_OFFSET = 4 + 32;

/** Bytes of Layer III side information, which comes between the header (and its CRC) and the Xing tag. */
export function sideInfoBytes(h: Pick<FrameHeader, 'version' | 'channelMode'>): number {
  const mono = h.channelMode === 'mono';
  if (h.version === '1') return mono ? 17 : 32;
  return mono ? 9 : 17;
}

function ascii(frame: Uint8Array, at: number, length: number): string {
  if (at + length > frame.length) return '';
  return String.fromCharCode(...frame.subarray(at, at + length));
}

function u32(frame: Uint8Array, at: number): number {
  return ((frame[at]! << 24) >>> 0) + (frame[at + 1]! << 16) + (frame[at + 2]! << 8) + frame[at + 3]!;
}

/** The Xing, Info or VBRI header carried by `frame` (the first frame's bytes, header included), or null. */
export function readHeaderFrame(frame: Uint8Array, h: FrameHeader): HeaderFrame | null {
  if (h.layer !== 3) return null;
  // Encoders that protect the frame with a CRC put the tag after it; some put it where it would be without.
  const plain = 4 + sideInfoBytes(h);
  for (const at of h.crc ? [plain + 2, plain] : [plain]) {
    const tag = ascii(frame, at, 4);
    if (tag !== 'Xing' && tag !== 'Info') continue;
    if (at + 8 > frame.length) return { kind: tag, frames: null, bytes: null };
    const flags = u32(frame, at + 4);
    let field = at + 8;
    let frames: number | null = null;
    let bytes: number | null = null;
    if (flags & XING_FRAMES_FLAG) {
      if (field + 4 <= frame.length) frames = u32(frame, field);
      field += 4;
    }
    if (flags & XING_BYTES_FLAG && field + 4 <= frame.length) bytes = u32(frame, field);
    return { kind: tag, frames: frames || null, bytes: bytes || null };
  }
  // "VBRI", version (2), delay (2), quality (2), bytes (4), frames (4).
  if (ascii(frame, VBRI_OFFSET, 4) === 'VBRI' && VBRI_OFFSET + 18 <= frame.length) {
    const bytes = u32(frame, VBRI_OFFSET + 10);
    const frames = u32(frame, VBRI_OFFSET + 14);
    return { kind: 'VBRI', frames: frames || null, bytes: bytes || null };
  }
  return null;
}
