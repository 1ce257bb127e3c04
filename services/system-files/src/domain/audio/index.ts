/**
 * The Audio check of the partner API (resource "Audio check") for an .mp3 uploaded into files/.
 *
 * A file with no MPEG audio frames at all (a WAV or other format under an .mp3 name, random
 * bytes, an empty file, tags alone) is `not_mp3`; MPEG audio of Layer I or II (MP1, MP2) is
 * `not_layer3`: both are refused with a reason (400). Every other file is accepted, and its
 * check measures the stream against the best playback on a device: mono MP3, 16 kHz, 48 kbps
 * constant bitrate, no ID3 tags or cover art. All of a device's sound files share 9.75 MB
 * (9.75 × 1024 × 1024 = 10,223,616 bytes) of storage.
 *
 * | code                | severity | when                                                              | fixable by re-encoding, stripping tags or renaming      |
 * | ------------------- | -------- | ----------------------------------------------------------------- | ------------------------------------------------------- |
 * | too_big             | error    | file larger than the device storage (10,223,616 bytes)            | when the audio at 48 kbps would fit the storage         |
 * | large_file          | warn     | file larger than 25% of the device storage (2,555,904 bytes)      | when the audio at 48 kbps would take at most 25%        |
 * | stereo              | warn     | channel mode stereo, joint stereo or dual channel (anything but mono) | yes                                                 |
 * | high_sample_rate    | warn     | sample rate above 24 kHz (32, 44.1, 48 kHz)                       | yes                                                     |
 * | low_sample_rate     | warn     | sample rate below 16 kHz (8, 11.025, 12 kHz)                      | no: resampling cannot restore what is lost              |
 * | high_bitrate        | warn     | average bitrate above 64 kbps                                     | yes                                                     |
 * | large_tags          | warn     | ID3v2 + ID3v1 + APE + Lyrics3 tags above 4 KB (4096 bytes), or cover art | yes                                              |
 * | vbr                 | info     | variable bitrate (a Xing or VBRI header frame, or frames of differing bitrates) | yes                                       |
 * | long_clip           | info     | duration above 60 s                                               | no (the clip's length)                                  |
 * | uppercase_extension | info     | the name's extension is .mp3 in any other case (".MP3", ".Mp3")   | yes                                                     |
 *
 * - `playable`: no issue at `error` (a device cannot store a file that is `too_big`).
 * - `ideal`: no issue at `warn` or `error`.
 * - `fixable`: every `warn` and `error` issue is fixable as above (so an ideal file is fixable).
 * - `issues`: most serious first (error, warn, info), then in the table's order.
 * - `duration_s`: audio frames times samples per frame over the sample rate (3 decimals). The
 *   frames are the count in a Xing/Info/VBRI header frame when it gives one within 2 frames or 1%
 *   of the frames walked, else the frames walked (the file was cut short or joined after encoding).
 * - `bitrate_kbps`: the bitrate of a constant-bitrate stream, else audio bytes over duration.
 * - `vbr`: a Xing (not Info) or VBRI header frame, or audio frames of more than one bitrate.
 * - `device_storage_pct`: file size over the device storage, in percent (2 decimals).
 */
import { open } from 'node:fs/promises';
import { ByteWindow, fileSource, type ByteSource } from './byte-source';
import { formatName } from './frame-header';
import { assess } from './rules';
import type { AudioCheck } from './types';
import { scanStream } from './stream';
import { readTagLayout } from './tags';

export type { AudioCheck, AudioIssue, AudioSummary } from './types';

export type AudioVerdict = { ok: true; audio: AudioCheck } | { ok: false; code: 'not_mp3' | 'not_layer3'; reason: string };

/** What a file without MPEG audio is, told by its first bytes, so the reason can name it. */
function otherFormat(head: Uint8Array): string | null {
  const text = (at: number, length: number) => String.fromCharCode(...head.subarray(at, at + length));
  if (text(0, 4) === 'RIFF' && text(8, 4) === 'WAVE') return 'a WAV file (RIFF/WAVE)';
  if (text(0, 4) === 'FORM' && (text(8, 4) === 'AIFF' || text(8, 4) === 'AIFC')) return 'an AIFF file';
  if (text(0, 4) === 'OggS') return 'an Ogg file (Vorbis or Opus)';
  if (text(0, 4) === 'fLaC') return 'a FLAC file';
  if (text(4, 4) === 'ftyp') return 'an MP4/M4A file';
  if (head[0] === 0xff && ((head[1] ?? 0) & 0xf6) === 0xf0) return 'AAC audio (ADTS)';
  return null;
}

async function check(source: ByteSource, name: string): Promise<AudioVerdict> {
  const notMp3 = (why: string): AudioVerdict => ({
    ok: false,
    code: 'not_mp3',
    reason: `The file holds no MP3 (MPEG Layer III) audio: ${why}; encode it as MP3.`,
  });
  if (source.size === 0) return notMp3('it is empty');
  const layout = await readTagLayout(source);
  if (layout.audioStart >= layout.audioEnd) return notMp3('it holds tags and no audio');
  const scan = await scanStream(new ByteWindow(source), layout.audioStart, layout.audioEnd);
  if (scan.kind === 'none') {
    const format = otherFormat(await source.read(layout.audioStart, 12));
    return notMp3(format ? `it is ${format}` : 'no MPEG audio frames were found');
  }
  if (scan.kind === 'other_layer') {
    const kind = scan.first.layer === 2 ? 'MP2' : 'MP1';
    return {
      ok: false,
      code: 'not_layer3',
      reason: `The file holds ${formatName(scan.first)} audio (${kind}), not Layer III (MP3); encode it as MP3.`,
    };
  }
  return { ok: true, audio: assess(scan.facts, layout, source.size, name) };
}

/** Checks the .mp3 at `filePath` (read in bounded chunks, never whole) uploaded as `name`. */
export async function checkMp3File(filePath: string, name: string): Promise<AudioVerdict> {
  const handle = await open(filePath, 'r');
  try {
    const { size } = await handle.stat();
    return await check(fileSource(handle, size), name);
  } finally {
    await handle.close();
  }
}
