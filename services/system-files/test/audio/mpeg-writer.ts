/**
 * Writes the bytes of real MPEG audio files for the Audio check's tests: frame headers from the
 * standard's tables with zero-filled bodies of the exact frame length, Xing/Info and VBRI header
 * frames, ID3v2 (with APIC/PIC cover art), ID3v1, APEv2 and Lyrics3v2 tags, and a PCM WAV.
 * The tables here are written out again from ISO/IEC 11172-3 / 13818-3 rather than taken from
 * the code under test, so a wrong table there fails the tests.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type Version = '1' | '2' | '2.5';
export type Mode = 'stereo' | 'joint_stereo' | 'dual_channel' | 'mono';

export interface FrameSpec {
  version: Version;
  layer: 1 | 2 | 3;
  bitrateKbps: number;
  sampleRateHz: number;
  mode: Mode;
  padding?: boolean;
  /** A CRC follows the header (protection bit 0). */
  crc?: boolean;
}

/** The recommended encoding: MPEG-2 Layer III, 16 kHz, mono, 48 kbps (216-byte frames of 36 ms). */
export const BEST: FrameSpec = { version: '2', layer: 3, bitrateKbps: 48, sampleRateHz: 16000, mode: 'mono' };

const VERSION_BITS: Record<Version, number> = { '1': 0b11, '2': 0b10, '2.5': 0b00 };
const LAYER_BITS = { 1: 0b11, 2: 0b10, 3: 0b01 } as const;
const MODE_BITS: Record<Mode, number> = { stereo: 0, joint_stereo: 1, dual_channel: 2, mono: 3 };
const RATES: Record<Version, number[]> = { '1': [44100, 48000, 32000], '2': [22050, 24000, 16000], '2.5': [11025, 12000, 8000] };
// Bitrate index 1..14 in kbps.
const KBPS = {
  '1-1': [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  '1-2': [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  '1-3': [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  'lsf-1': [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  'lsf-23': [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};

function kbpsTable(spec: FrameSpec): number[] {
  if (spec.version === '1') return KBPS[`1-${spec.layer}`];
  return spec.layer === 1 ? KBPS['lsf-1'] : KBPS['lsf-23'];
}

export function header(spec: FrameSpec): Buffer {
  const bitrateIndex = kbpsTable(spec).indexOf(spec.bitrateKbps) + 1;
  const rateIndex = RATES[spec.version].indexOf(spec.sampleRateHz);
  if (bitrateIndex < 1 || rateIndex < 0) throw new Error(`no such frame: ${JSON.stringify(spec)}`);
  return Buffer.from([
    0xff,
    0xe0 | (VERSION_BITS[spec.version] << 3) | (LAYER_BITS[spec.layer] << 1) | (spec.crc ? 0 : 1),
    (bitrateIndex << 4) | (rateIndex << 2) | (spec.padding ? 0b10 : 0),
    MODE_BITS[spec.mode] << 6,
  ]);
}

/** Samples per channel in one frame. */
export function samplesPerFrame(spec: FrameSpec): number {
  if (spec.layer === 1) return 384;
  if (spec.layer === 2 || spec.version === '1') return 1152;
  return 576;
}

export function frameBytes(spec: FrameSpec): number {
  const pad = spec.padding ? 1 : 0;
  const bps = spec.bitrateKbps * 1000;
  if (spec.layer === 1) return (Math.floor((12 * bps) / spec.sampleRateHz) + pad) * 4;
  const coefficient = spec.layer === 3 && spec.version !== '1' ? 72 : 144;
  return Math.floor((coefficient * bps) / spec.sampleRateHz) + pad;
}

/** One frame: the header, then zeros to the frame's length. */
export function frame(spec: FrameSpec): Buffer {
  const bytes = Buffer.alloc(frameBytes(spec));
  header(spec).copy(bytes, 0);
  return bytes;
}

export function frames(spec: FrameSpec, count: number): Buffer {
  const one = frame(spec);
  return Buffer.concat(Array.from({ length: count }, () => one));
}

/** Where the Xing/Info tag goes: after the header, its CRC and the Layer III side information. */
function xingOffset(spec: FrameSpec): number {
  const mono = spec.mode === 'mono';
  const side = spec.version === '1' ? (mono ? 17 : 32) : mono ? 9 : 17;
  return 4 + (spec.crc ? 2 : 0) + side;
}

/** A Xing (VBR) or Info (CBR) header frame; `frames`/`bytes` set the flags of the fields they fill. */
export function xingFrame(spec: FrameSpec, tag: 'Xing' | 'Info', fields: { frames?: number; bytes?: number }): Buffer {
  const bytes = frame(spec);
  let at = xingOffset(spec);
  bytes.write(tag, at, 'latin1');
  bytes.writeUInt32BE((fields.frames !== undefined ? 1 : 0) | (fields.bytes !== undefined ? 2 : 0), at + 4);
  at += 8;
  if (fields.frames !== undefined) {
    bytes.writeUInt32BE(fields.frames, at);
    at += 4;
  }
  if (fields.bytes !== undefined) bytes.writeUInt32BE(fields.bytes, at);
  return bytes;
}

/** A Fraunhofer VBRI header frame: the tag 32 bytes after the header. */
export function vbriFrame(spec: FrameSpec, fields: { frames: number; bytes: number }): Buffer {
  const bytes = frame(spec);
  bytes.write('VBRI', 36, 'latin1');
  bytes.writeUInt16BE(1, 40); // version
  bytes.writeUInt16BE(576, 42); // delay
  bytes.writeUInt16BE(75, 44); // quality
  bytes.writeUInt32BE(fields.bytes, 46);
  bytes.writeUInt32BE(fields.frames, 50);
  return bytes;
}

function syncsafe(value: number): Buffer {
  return Buffer.from([(value >> 21) & 0x7f, (value >> 14) & 0x7f, (value >> 7) & 0x7f, value & 0x7f]);
}

export interface Id3Frame {
  id: string;
  data: Uint8Array;
}

/** An ID3v2 tag of `major` 2, 3 or 4; `unsync` applies (v2.3) unsynchronisation to the whole tag. */
export function id3v2(major: 2 | 3 | 4, items: Id3Frame[], options: { padding?: number; footer?: boolean; unsync?: boolean } = {}): Buffer {
  const framesBytes = items.map(({ id, data }) => {
    if (major === 2) {
      const size = Buffer.from([(data.length >> 16) & 0xff, (data.length >> 8) & 0xff, data.length & 0xff]);
      return Buffer.concat([Buffer.from(id, 'latin1'), size, data]);
    }
    const size = major === 4 ? syncsafe(data.length) : Buffer.alloc(4);
    if (major === 3) size.writeUInt32BE(data.length);
    return Buffer.concat([Buffer.from(id, 'latin1'), size, Buffer.alloc(2), data]);
  });
  let body = Buffer.concat([...framesBytes, Buffer.alloc(options.padding ?? 0)]);
  if (options.unsync) {
    const out: number[] = [];
    for (const b of body) {
      out.push(b);
      if (b === 0xff) out.push(0x00);
    }
    body = Buffer.from(out);
  }
  const flags = (options.unsync ? 0x80 : 0) | (options.footer ? 0x10 : 0);
  const head = Buffer.concat([Buffer.from('ID3', 'latin1'), Buffer.from([major, 0, flags]), syncsafe(body.length)]);
  const foot = options.footer ? Buffer.concat([Buffer.from('3DI', 'latin1'), Buffer.from([major, 0, flags]), syncsafe(body.length)]) : Buffer.alloc(0);
  return Buffer.concat([head, body, foot]);
}

/** A text frame (ISO-8859-1). */
export function textFrame(id: string, text: string): Id3Frame {
  return { id, data: Buffer.concat([Buffer.from([0]), Buffer.from(text, 'latin1')]) };
}

/** An attached picture: APIC (v2.3/v2.4) or PIC (v2.2), front cover. */
export function pictureFrame(major: 2 | 3 | 4, image: Uint8Array): Id3Frame {
  if (major === 2) return { id: 'PIC', data: Buffer.concat([Buffer.from([0]), Buffer.from('JPG', 'latin1'), Buffer.from([3, 0]), image]) };
  return { id: 'APIC', data: Buffer.concat([Buffer.from([0]), Buffer.from('image/jpeg\0', 'latin1'), Buffer.from([3, 0]), image]) };
}

export function id3v1(title: string): Buffer {
  const tag = Buffer.alloc(128);
  tag.write('TAG', 0, 'latin1');
  tag.write(title.slice(0, 30), 3, 'latin1');
  tag[127] = 12; // genre "Other"
  return tag;
}

/** An APEv2 tag with its header and footer. */
export function apeTag(items: Record<string, string>): Buffer {
  const itemBytes = Buffer.concat(
    Object.entries(items).map(([key, value]) => {
      const head = Buffer.alloc(8);
      head.writeUInt32LE(Buffer.byteLength(value), 0);
      return Buffer.concat([head, Buffer.from(`${key}\0`, 'latin1'), Buffer.from(value)]);
    }),
  );
  const block = (flags: number) => {
    const b = Buffer.alloc(32);
    b.write('APETAGEX', 0, 'latin1');
    b.writeUInt32LE(2000, 8);
    b.writeUInt32LE(itemBytes.length + 32, 12);
    b.writeUInt32LE(Object.keys(items).length, 16);
    b.writeUInt32LE(flags >>> 0, 20);
    return b;
  };
  return Buffer.concat([block(0xa0000000), itemBytes, block(0x80000000)]);
}

export function lyrics3v2(lyrics: string): Buffer {
  const body = Buffer.from(`LYRICSBEGININD0000210LYR${String(lyrics.length).padStart(5, '0')}${lyrics}`, 'latin1');
  return Buffer.concat([body, Buffer.from(`${String(body.length).padStart(6, '0')}LYRICS200`, 'latin1')]);
}

/** Deterministic noise (xorshift32), so a failing case can be replayed. */
export function noise(length: number, seed = 0x9e3779b9): Buffer {
  const bytes = Buffer.alloc(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

/** A 16-bit PCM WAV: a 440 Hz tone with noise, so its samples hold plenty of 0xFF bytes. */
export function wav(seconds: number, sampleRateHz = 16000, channels = 1): Buffer {
  const count = Math.round(seconds * sampleRateHz);
  const jitter = noise(count);
  const data = Buffer.alloc(count * channels * 2);
  for (let i = 0; i < count; i++) {
    const sample = Math.round(12000 * Math.sin((2 * Math.PI * 440 * i) / sampleRateHz)) + jitter[i]! - 128;
    for (let c = 0; c < channels; c++) data.writeInt16LE(sample, (i * channels + c) * 2);
  }
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVE', 8, 'latin1');
  head.write('fmt ', 12, 'latin1');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20); // PCM
  head.writeUInt16LE(channels, 22);
  head.writeUInt32LE(sampleRateHz, 24);
  head.writeUInt32LE(sampleRateHz * channels * 2, 28);
  head.writeUInt16LE(channels * 2, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36, 'latin1');
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

/** A temporary directory the tests write their files into. */
export class AudioDir {
  readonly path = mkdtempSync(join(tmpdir(), 'system-files-audio-'));

  write(name: string, ...parts: Uint8Array[]): string {
    const file = join(this.path, name);
    writeFileSync(file, Buffer.concat(parts));
    return file;
  }

  remove(): void {
    rmSync(this.path, { recursive: true, force: true });
  }
}
