/**
 * From what the walk measured to the partner's Audio check: the summary, the issues against the
 * best playback on a device (mono MP3, 16 kHz, 48 kbps constant bitrate, no tags or cover art),
 * and playable / ideal / fixable. The thresholds are the table at the top of ./index.ts.
 */
import type { AudioCheck, AudioIssue, AudioSummary } from './types';
import { formatName, type ChannelMode } from './frame-header';
import type { StreamFacts } from './stream';
import type { TagLayout } from './tags';

const MB = 1024 * 1024;
/** All of a device's sound files share this much storage. */
export const DEVICE_STORAGE_BYTES = 9.75 * MB;
/** One file above this share of the storage crowds out the others. */
export const LARGE_FILE_SHARE = 0.25;
export const MAX_SAMPLE_RATE_HZ = 24000;
export const MIN_SAMPLE_RATE_HZ = 16000;
export const MAX_BITRATE_KBPS = 64;
export const MAX_TAG_BYTES = 4096;
export const LONG_CLIP_S = 60;
/** The recommended encoding, used to tell whether re-encoding would make a file fit. */
export const BEST_BITRATE_KBPS = 48;
export const BEST_SAMPLE_RATE_HZ = 16000;

const SEVERITY_RANK: Record<AudioIssue['severity'], number> = { error: 0, warn: 1, info: 2 };

const MODE_TEXT: Record<ChannelMode, string> = {
  stereo: 'stereo',
  joint_stereo: 'joint stereo',
  dual_channel: 'dual channel',
  mono: 'mono',
};

function round(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}

const megabytes = (bytes: number): string => `${round(bytes / MB, 2)} MB`;
const kilohertz = (hz: number): string => `${hz / 1000} kHz`;
const kilobytes = (bytes: number): string => `${round(bytes / 1024, 1)} KB`;

/** The channel mode most audio frames use (the first frame's when no audio frame was whole). */
function dominantMode(facts: StreamFacts): ChannelMode {
  let best: ChannelMode = facts.first.channelMode;
  for (const mode of Object.keys(facts.modes) as ChannelMode[]) if (facts.modes[mode] > facts.modes[best]) best = mode;
  return best;
}

/**
 * Frames the header frame may count apart from the walk and still describe this stream (encoders
 * differ on counting a last partial frame); a header further off was written for another stream,
 * before the file was cut short or joined to another, and the walk is what a device plays.
 */
const HEADER_FRAMES_SLACK = 2;
const HEADER_FRAMES_SLACK_SHARE = 0.01;

/** Audio frames: the header frame's count when it has one that fits the stream (what players show), else the frames walked. */
function frameCount(facts: StreamFacts): number {
  const claimed = facts.headerFrame?.frames;
  if (!claimed) return facts.frames;
  const slack = Math.max(HEADER_FRAMES_SLACK, facts.frames * HEADER_FRAMES_SLACK_SHARE);
  return Math.abs(claimed - facts.frames) <= slack ? claimed : facts.frames;
}

/** Average kbps: the one bitrate of a constant-bitrate stream, else audio bytes over audio time. */
function averageBitrate(facts: StreamFacts): number | null {
  if (facts.bitratesKbps.length === 1) return facts.bitratesKbps[0]!;
  if (facts.samples === 0) return null;
  return Math.round((facts.bytes * 8 * facts.first.sampleRateHz) / facts.samples / 1000);
}

export function summarize(facts: StreamFacts, layout: TagLayout, sizeBytes: number): AudioSummary {
  const { first } = facts;
  const mode = dominantMode(facts);
  const bitrate = averageBitrate(facts);
  const vbr = facts.headerFrame?.kind === 'Xing' || facts.headerFrame?.kind === 'VBRI' || facts.bitratesKbps.length > 1;
  const duration = round((frameCount(facts) * first.samples) / first.sampleRateHz, 3);
  const pct = round((sizeBytes / DEVICE_STORAGE_BYTES) * 100, 2);
  const format = formatName(first);
  const rate = bitrate === null ? 'unknown bitrate' : `${bitrate} kbps ${vbr ? 'VBR' : 'CBR'}`;
  return {
    text: `${format}, ${kilohertz(first.sampleRateHz)} ${MODE_TEXT[mode]}, ${rate}, ${duration.toFixed(1)} s, ${pct}% of device storage`,
    format,
    sample_rate_hz: first.sampleRateHz,
    channels: mode === 'mono' ? 1 : 2,
    channel_mode: mode,
    bitrate_kbps: bitrate,
    vbr,
    duration_s: duration,
    size_bytes: sizeBytes,
    device_storage_pct: pct,
    tag_bytes: layout.tagBytes,
    cover_art: layout.coverArt,
    header_frame: facts.headerFrame?.kind ?? null,
  };
}

interface Finding extends AudioIssue {
  /** Re-encoding at the best settings, stripping tags or renaming clears it. */
  fixable: boolean;
}

function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? '' : name.slice(dot + 1);
}

/** Every issue of the summary, in rule order (sorted by severity later). */
function findings(s: AudioSummary, name: string): Finding[] {
  const out: Finding[] = [];
  const add = (code: string, severity: AudioIssue['severity'], message: string, fixable = true) => out.push({ code, severity, message, fixable });
  // The size the same audio would have as mono 16 kHz 48 kbps CBR without tags.
  const reencodedBytes = Math.ceil((s.duration_s * BEST_BITRATE_KBPS * 1000) / 8);
  const storage = megabytes(DEVICE_STORAGE_BYTES);

  if (s.size_bytes > DEVICE_STORAGE_BYTES) {
    add(
      'too_big',
      'error',
      `The file is ${megabytes(s.size_bytes)}, more than the ${storage} all of a device's sound files share: a device cannot store it.`,
      reencodedBytes <= DEVICE_STORAGE_BYTES,
    );
  } else if (s.size_bytes > DEVICE_STORAGE_BYTES * LARGE_FILE_SHARE) {
    add(
      'large_file',
      'warn',
      `The file takes ${s.device_storage_pct}% of the ${storage} all of a device's sound files share.`,
      reencodedBytes <= DEVICE_STORAGE_BYTES * LARGE_FILE_SHARE,
    );
  }
  if (s.channel_mode && s.channel_mode !== 'mono') {
    add('stereo', 'warn', `The audio is ${MODE_TEXT[s.channel_mode]}; mono is best for playback on a device and about halves the size.`);
  }
  if (s.sample_rate_hz !== null && s.sample_rate_hz > MAX_SAMPLE_RATE_HZ) {
    add('high_sample_rate', 'warn', `The sample rate is ${kilohertz(s.sample_rate_hz)}; ${kilohertz(BEST_SAMPLE_RATE_HZ)} is best for playback on a device.`);
  }
  if (s.sample_rate_hz !== null && s.sample_rate_hz < MIN_SAMPLE_RATE_HZ) {
    add(
      'low_sample_rate',
      'warn',
      `The sample rate is ${kilohertz(s.sample_rate_hz)}, which sounds muffled; ${kilohertz(BEST_SAMPLE_RATE_HZ)} is best. Re-encode from a better source: resampling this file cannot restore what is lost.`,
      false,
    );
  }
  if (s.bitrate_kbps !== null && s.bitrate_kbps > MAX_BITRATE_KBPS) {
    add('high_bitrate', 'warn', `The average bitrate is ${s.bitrate_kbps} kbps; ${BEST_BITRATE_KBPS} kbps is best for playback on a device.`);
  }
  if (s.cover_art || s.tag_bytes > MAX_TAG_BYTES) {
    const art = s.cover_art ? ' including cover art' : '';
    add('large_tags', 'warn', `Tags (ID3/APE)${art} take ${s.tag_bytes} bytes (${kilobytes(s.tag_bytes)}); a device plays none of it: strip the tags.`);
  }
  if (s.vbr) add('vbr', 'info', `The bitrate is variable; a constant bitrate (${BEST_BITRATE_KBPS} kbps) is best for playback on a device.`);
  if (s.duration_s > LONG_CLIP_S) {
    add('long_clip', 'info', `The clip is ${s.duration_s.toFixed(1)} s long, more than ${LONG_CLIP_S} s.`, false);
  }
  const extension = extensionOf(name);
  if (extension.toLowerCase() === 'mp3' && extension !== 'mp3') {
    add('uppercase_extension', 'info', `The extension ".${extension}" is not lower case; name the file ".mp3".`);
  }
  return out;
}

export function assess(facts: StreamFacts, layout: TagLayout, sizeBytes: number, name: string): AudioCheck {
  const summary = summarize(facts, layout, sizeBytes);
  const found = findings(summary, name);
  const blocking = found.filter((f) => f.severity !== 'info');
  const issues = found
    .map((f, order) => ({ f, order }))
    .sort((a, b) => SEVERITY_RANK[a.f.severity] - SEVERITY_RANK[b.f.severity] || a.order - b.order)
    .map(({ f }) => ({ code: f.code, severity: f.severity, message: f.message }));
  return {
    playable: !found.some((f) => f.severity === 'error'),
    ideal: blocking.length === 0,
    fixable: blocking.every((f) => f.fixable),
    summary,
    issues,
  };
}
