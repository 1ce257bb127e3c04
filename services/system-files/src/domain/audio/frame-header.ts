/**
 * MPEG audio frame headers (ISO/IEC 11172-3 and 13818-3, plus the unofficial MPEG-2.5 extension):
 * the 4 bytes in front of every frame that give its version, layer, bitrate, sample rate,
 * padding and channel mode, and so its length and the number of samples it decodes to.
 */

export type MpegVersion = '1' | '2' | '2.5';
export type MpegLayer = 1 | 2 | 3;
export type ChannelMode = 'stereo' | 'joint_stereo' | 'dual_channel' | 'mono';

export interface FrameHeader {
  version: MpegVersion;
  layer: MpegLayer;
  /** A 16-bit CRC follows the header. */
  crc: boolean;
  bitrateKbps: number;
  sampleRateHz: number;
  padding: boolean;
  channelMode: ChannelMode;
  /** Samples per channel the frame decodes to. */
  samples: number;
  /** Bytes of the whole frame, header included. */
  length: number;
}

/** Header bits 20-19 → version; '01' is reserved. */
const VERSIONS: readonly (MpegVersion | null)[] = ['2.5', null, '2', '1'];
/** Header bits 18-17 → layer; '00' is reserved. */
const LAYERS: readonly (MpegLayer | null)[] = [null, 3, 2, 1];
const CHANNEL_MODES: readonly ChannelMode[] = ['stereo', 'joint_stereo', 'dual_channel', 'mono'];

/** Bitrates in kbps by bitrate index 1-14 (0 is free format, 15 is forbidden). */
const BITRATES = {
  v1l1: [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  v1l2: [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  v1l3: [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  v2l1: [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  v2l23: [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
} as const;

const SAMPLE_RATES: Record<MpegVersion, readonly number[]> = {
  '1': [44100, 48000, 32000],
  '2': [22050, 24000, 16000],
  '2.5': [11025, 12000, 8000],
};

function bitrateTable(version: MpegVersion, layer: MpegLayer): readonly number[] {
  if (version === '1') return layer === 1 ? BITRATES.v1l1 : layer === 2 ? BITRATES.v1l2 : BITRATES.v1l3;
  return layer === 1 ? BITRATES.v2l1 : BITRATES.v2l23;
}

/** Samples per channel in one frame. Layer III of MPEG-2 and 2.5 (the low sample rates) halves the frame. */
export function samplesPerFrame(version: MpegVersion, layer: MpegLayer): number {
  if (layer === 1) return 384;
  if (layer === 2) return 1152;
  return version === '1' ? 1152 : 576;
}

/** Bytes of a frame, header included (Layer I counts in 4-byte slots). */
export function frameLength(version: MpegVersion, layer: MpegLayer, bitrateKbps: number, sampleRateHz: number, padding: boolean): number {
  const bps = bitrateKbps * 1000;
  if (layer === 1) return (Math.floor((12 * bps) / sampleRateHz) + (padding ? 1 : 0)) * 4;
  const perSample = samplesPerFrame(version, layer) / 8;
  return Math.floor((perSample * bps) / sampleRateHz) + (padding ? 1 : 0);
}

/**
 * The frame header at `at`, or null when the bytes there are not one: no sync, a reserved
 * version, layer, sample rate or emphasis, the forbidden bitrate index, MPEG-2.5 outside Layer III,
 * or free format (index 0, whose frame length is not in the header and is not supported here).
 */
export function parseFrameHeader(bytes: Uint8Array, at: number): FrameHeader | null {
  if (at < 0 || at + 4 > bytes.length) return null;
  const b0 = bytes[at]!;
  const b1 = bytes[at + 1]!;
  const b2 = bytes[at + 2]!;
  const b3 = bytes[at + 3]!;
  if (b0 !== 0xff || (b1 & 0xe0) !== 0xe0) return null;
  const version = VERSIONS[(b1 >> 3) & 0x03];
  const layer = LAYERS[(b1 >> 1) & 0x03];
  if (!version || !layer) return null;
  // MPEG-2.5 extends Layer III only; Layer I/II headers with it are noise, not audio.
  if (version === '2.5' && layer !== 3) return null;
  const bitrateIndex = (b2 >> 4) & 0x0f;
  const sampleRateIndex = (b2 >> 2) & 0x03;
  if (bitrateIndex === 0 || bitrateIndex === 15 || sampleRateIndex === 3) return null;
  if ((b3 & 0x03) === 2) return null;
  const bitrateKbps = bitrateTable(version, layer)[bitrateIndex - 1]!;
  const sampleRateHz = SAMPLE_RATES[version][sampleRateIndex]!;
  const padding = (b2 & 0x02) !== 0;
  return {
    version,
    layer,
    crc: (b1 & 0x01) === 0,
    bitrateKbps,
    sampleRateHz,
    padding,
    channelMode: CHANNEL_MODES[(b3 >> 6) & 0x03]!,
    samples: samplesPerFrame(version, layer),
    length: frameLength(version, layer, bitrateKbps, sampleRateHz, padding),
  };
}

/** The longest frame a valid header describes: MPEG-1 Layer II, 384 kbps, 32 kHz, padded. */
export const MAX_FRAME_BYTES = 1729;

/** Two frames of one stream share version, layer and sample rate (bitrate, padding and mode may vary). */
export function sameStream(a: FrameHeader, b: FrameHeader): boolean {
  return a.version === b.version && a.layer === b.layer && a.sampleRateHz === b.sampleRateHz;
}

/** "MPEG-1 Layer III", "MPEG-2.5 Layer II", … */
export function formatName(h: Pick<FrameHeader, 'version' | 'layer'>): string {
  return `MPEG-${h.version} Layer ${'I'.repeat(h.layer)}`;
}
