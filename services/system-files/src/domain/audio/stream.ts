/**
 * The walk over the audio between the tags: find where the MPEG audio frames start, then step
 * from frame to frame to the end, counting frames, samples and bytes. Bytes that are not frames
 * (junk, a damaged frame) are skipped by finding the next place where frames follow each other.
 */
import type { ByteWindow } from './byte-source';
import { MAX_FRAME_BYTES, parseFrameHeader, sameStream, type ChannelMode, type FrameHeader } from './frame-header';
import { readHeaderFrame, type HeaderFrame } from './header-frame';

/**
 * Frames in a row that make a stream: a 4-byte header with a valid look turns up by chance about
 * once in a few thousand bytes of anything, a run of three that point at each other does not.
 */
export const FRAMES_TO_START = 3;
/** After a damaged stretch inside a stream already found, two frames in a row pick it up again. */
export const FRAMES_TO_RESUME = 2;

export interface StreamFacts {
  /** The first frame (the header frame when there is one). */
  first: FrameHeader;
  headerFrame: HeaderFrame | null;
  /** Audio frames walked, the header frame excluded; a frame cut off by the end is not counted. */
  frames: number;
  samples: number;
  bytes: number;
  /** The distinct bitrates of the audio frames. */
  bitratesKbps: number[];
  modes: Record<ChannelMode, number>;
  /** Bytes between the tags that are not frames: leading junk, damaged stretches, a cut-off last frame. */
  junkBytes: number;
}

export type StreamScan = { kind: 'none' } | { kind: 'other_layer'; first: FrameHeader } | { kind: 'layer3'; facts: StreamFacts };

async function headerAt(window: ByteWindow, position: number, end: number): Promise<FrameHeader | null> {
  if (position + 4 > end) return null;
  await window.ensure(position, 4);
  return parseFrameHeader(window.slice(position, 4), 0);
}

/**
 * Whether `need` frames of the stream of `like` follow each other from `position`. A stream may
 * end early: a run that reaches the end of the audio counts with one frame less.
 */
async function framesFollow(window: ByteWindow, position: number, end: number, need: number, like: FrameHeader): Promise<boolean> {
  let count = 0;
  let at = position;
  while (count < need) {
    if (at + 4 > end) return count >= need - 1 && count > 0;
    const h = await headerAt(window, at, end);
    if (!h || !sameStream(like, h)) return false;
    count++;
    at += h.length;
  }
  return true;
}

/** The first position in [from, end) where `need` frames follow each other (of the stream of `like` when given), or -1. */
async function findFrames(window: ByteWindow, from: number, end: number, need: number, like?: FrameHeader): Promise<number> {
  const lookahead = need * MAX_FRAME_BYTES + 4;
  let position = from;
  while (position + 4 <= end) {
    await window.ensure(position, Math.min(end - position, lookahead));
    // Holding this view keeps its bytes even when checking a candidate moves the window on.
    const { bytes, start } = window.view();
    const stop = Math.min(start + bytes.length, end);
    for (let i = bytes.indexOf(0xff, position - start); i >= 0 && start + i + 4 <= stop; i = bytes.indexOf(0xff, i + 1)) {
      // Sync, then a bitrate index and sample rate that are not the forbidden 15 and reserved 3, before parsing.
      if ((bytes[i + 1]! & 0xe0) !== 0xe0 || (bytes[i + 2]! & 0xf0) === 0xf0 || (bytes[i + 2]! & 0x0c) === 0x0c) continue;
      const h = parseFrameHeader(bytes, i);
      if (!h || (like && !sameStream(like, h))) continue;
      if (await framesFollow(window, start + i, end, need, like ?? h)) return start + i;
    }
    position = Math.max(position + 1, stop - 3);
  }
  return -1;
}

/** Walks the MPEG audio in [start, end) of the window's source. */
export async function scanStream(window: ByteWindow, start: number, end: number): Promise<StreamScan> {
  const firstAt = await findFrames(window, start, end, FRAMES_TO_START);
  if (firstAt < 0) return { kind: 'none' };
  const first = (await headerAt(window, firstAt, end))!;
  if (first.layer !== 3) return { kind: 'other_layer', first };

  let headerFrame: HeaderFrame | null = null;
  if (firstAt + first.length <= end) {
    await window.ensure(firstAt, first.length);
    headerFrame = readHeaderFrame(window.slice(firstAt, first.length), first);
  }
  const facts: StreamFacts = {
    first,
    headerFrame,
    frames: 0,
    samples: 0,
    bytes: 0,
    bitratesKbps: [],
    modes: { stereo: 0, joint_stereo: 0, dual_channel: 0, mono: 0 },
    junkBytes: firstAt - start,
  };
  const bitrates = new Set<number>();
  let position = headerFrame ? firstAt + first.length : firstAt;
  while (position < end) {
    const h = await headerAt(window, position, end);
    if (h && sameStream(first, h)) {
      if (position + h.length > end) {
        facts.junkBytes += end - position;
        break;
      }
      facts.frames++;
      facts.samples += h.samples;
      facts.bytes += h.length;
      facts.modes[h.channelMode]++;
      bitrates.add(h.bitrateKbps);
      position += h.length;
      continue;
    }
    const next = await findFrames(window, position + 1, end, FRAMES_TO_RESUME, first);
    const resume = next < 0 ? end : next;
    facts.junkBytes += resume - position;
    position = resume;
  }
  facts.bitratesKbps = [...bitrates].sort((a, b) => a - b);
  return { kind: 'layer3', facts };
}
