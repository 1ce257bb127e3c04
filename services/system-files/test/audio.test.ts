import { checkMp3File, type AudioCheck, type AudioVerdict } from '../src/domain/audio';
import {
  apeTag,
  AudioDir,
  BEST,
  frame,
  frames,
  header,
  id3v1,
  id3v2,
  lyrics3v2,
  noise,
  pictureFrame,
  textFrame,
  vbriFrame,
  wav,
  xingFrame,
  type FrameSpec,
  type Mode,
} from './audio/mpeg-writer';

/** 9.75 MB, the storage all of a device's sound files share. */
const STORAGE = 10_223_616;

const dir = new AudioDir();
afterAll(() => dir.remove());

let fileNumber = 0;
async function verdict(name: string, ...parts: Uint8Array[]): Promise<AudioVerdict> {
  // A number in front keeps the files apart on disk; the check is given the name as uploaded.
  const path = dir.write(`${++fileNumber}-${name}`, ...parts);
  return checkMp3File(path, name);
}

async function audio(name: string, ...parts: Uint8Array[]): Promise<AudioCheck> {
  const v = await verdict(name, ...parts);
  if (!v.ok) throw new Error(`expected an accepted file, got ${v.code}: ${v.reason}`);
  return v.audio;
}

const codes = (check: AudioCheck) => check.issues.map((i) => i.code);
const issue = (check: AudioCheck, code: string) => check.issues.find((i) => i.code === code);

/** 16 kHz mono at 32 and 64 kbps in turn: 144- and 288-byte frames averaging 48 kbps. */
function vbrFrames(count: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < count; i++) parts.push(frame({ ...BEST, bitrateKbps: i % 2 ? 64 : 32 }));
  return Buffer.concat(parts);
}

describe('Audio check: an accepted .mp3', () => {
  it('finds nothing to improve in mono 16 kHz 48 kbps CBR without tags, and says so in a sentence', async () => {
    const check = await audio('chime.mp3', frames(BEST, 100));
    expect(check).toEqual({
      playable: true,
      ideal: true,
      fixable: true,
      issues: [],
      summary: {
        text: 'MPEG-2 Layer III, 16 kHz mono, 48 kbps CBR, 3.6 s, 0.21% of device storage',
        format: 'MPEG-2 Layer III',
        sample_rate_hz: 16000,
        channels: 1,
        channel_mode: 'mono',
        bitrate_kbps: 48,
        vbr: false,
        duration_s: 3.6,
        size_bytes: 21600,
        device_storage_pct: 0.21,
        tag_bytes: 0,
        cover_art: false,
        header_frame: null,
      },
    });
  });

  it.each<Mode>(['stereo', 'joint_stereo', 'dual_channel'])('tells %s from mono and warns about it', async (mode) => {
    const check = await audio(`${mode}.mp3`, frames({ ...BEST, mode }, 20));
    expect(check.summary).toMatchObject({ channel_mode: mode, channels: 2 });
    expect(check.issues).toEqual([{ code: 'stereo', severity: 'warn', message: expect.stringContaining('mono') }]);
    expect(check).toMatchObject({ playable: true, ideal: false, fixable: true });
  });

  it('counts the frames of a CBR stream for its duration, padded frames included', async () => {
    const spec: FrameSpec = { version: '1', layer: 3, bitrateKbps: 128, sampleRateHz: 44100, mode: 'joint_stereo' };
    const parts = Array.from({ length: 49 }, (_, i) => frame({ ...spec, padding: i % 3 !== 0 }));
    const check = await audio('song.mp3', ...parts);
    // 49 frames of 1152 samples at 44.1 kHz.
    expect(check.summary).toMatchObject({ format: 'MPEG-1 Layer III', sample_rate_hz: 44100, bitrate_kbps: 128, vbr: false, duration_s: 1.28, header_frame: null });
    expect(check.summary.size_bytes).toBe(49 * 417 + 32);
    expect(check.summary.text).toBe('MPEG-1 Layer III, 44.1 kHz joint stereo, 128 kbps CBR, 1.3 s, 0.2% of device storage');
    expect(check.issues.map((i) => [i.code, i.severity])).toEqual([
      ['stereo', 'warn'],
      ['high_sample_rate', 'warn'],
      ['high_bitrate', 'warn'],
    ]);
  });

  it.each<[FrameSpec['version'], number, string[]]>([
    ['2.5', 8000, ['low_sample_rate']],
    ['2.5', 11025, ['low_sample_rate']],
    ['2.5', 12000, ['low_sample_rate']],
    ['2', 16000, []],
    ['2', 22050, []],
    ['2', 24000, []],
    ['1', 32000, ['high_sample_rate']],
    ['1', 44100, ['high_sample_rate']],
    ['1', 48000, ['high_sample_rate']],
  ])('MPEG-%s at %i Hz: %j', async (version, sampleRateHz, expected) => {
    const check = await audio('rate.mp3', frames({ version, layer: 3, bitrateKbps: 32, sampleRateHz, mode: 'mono' }, 30));
    expect(check.summary).toMatchObject({ format: `MPEG-${version} Layer III`, sample_rate_hz: sampleRateHz });
    expect(codes(check)).toEqual(expected);
    expect(check.ideal).toBe(expected.length === 0);
  });

  it('cannot fix a low sample rate by re-encoding: the file needs a better source', async () => {
    const check = await audio('tinny.mp3', frames({ version: '2.5', layer: 3, bitrateKbps: 16, sampleRateHz: 8000, mode: 'mono' }, 30));
    expect(check).toMatchObject({ playable: true, ideal: false, fixable: false });
    expect(issue(check, 'low_sample_rate')).toEqual({ code: 'low_sample_rate', severity: 'warn', message: expect.stringContaining('8 kHz') });
  });

  it('warns about an average bitrate above 64 kbps', async () => {
    expect(codes(await audio('b64.mp3', frames({ ...BEST, bitrateKbps: 64 }, 20)))).toEqual([]);
    const high = await audio('b80.mp3', frames({ ...BEST, bitrateKbps: 80 }, 20));
    expect(high.summary.bitrate_kbps).toBe(80);
    expect(high.issues).toEqual([{ code: 'high_bitrate', severity: 'warn', message: expect.stringContaining('80 kbps') }]);
    expect(high.fixable).toBe(true);
  });

  it('tells VBR from frames of differing bitrates and averages them', async () => {
    const check = await audio('vbr.mp3', vbrFrames(20));
    expect(check.summary).toMatchObject({ vbr: true, bitrate_kbps: 48, duration_s: 0.72, header_frame: null });
    expect(check.summary.text).toBe('MPEG-2 Layer III, 16 kHz mono, 48 kbps VBR, 0.7 s, 0.04% of device storage');
    // Variable bitrate is a note, not a warning: the file stays ideal.
    expect(check.issues).toEqual([{ code: 'vbr', severity: 'info', message: expect.any(String) }]);
    expect(check).toMatchObject({ ideal: true, fixable: true });
  });

  it('takes the duration from a Xing header frame, which is not audio itself', async () => {
    const body = vbrFrames(20);
    const xing = await audio('xing.mp3', xingFrame(BEST, 'Xing', { frames: 21, bytes: 216 + body.length }), body);
    // The header's count (21 frames of 36 ms), within a frame of the 20 walked.
    expect(xing.summary).toMatchObject({ header_frame: 'Xing', vbr: true, duration_s: 0.756, bitrate_kbps: 48, size_bytes: 216 + body.length });

    const exact = await audio('xing20.mp3', xingFrame(BEST, 'Xing', { frames: 20 }), body);
    expect(exact.summary.duration_s).toBe(0.72);

    // A Xing header written for a longer stream (the file was cut): the frames walked count.
    const cut = await audio('cut.mp3', xingFrame(BEST, 'Xing', { frames: 500 }), body);
    expect(cut.summary).toMatchObject({ header_frame: 'Xing', duration_s: 0.72 });

    // No frame count in the header: the frames walked.
    const noCount = await audio('nocount.mp3', xingFrame(BEST, 'Xing', { bytes: 999 }), body);
    expect(noCount.summary).toMatchObject({ header_frame: 'Xing', duration_s: 0.72 });
  });

  it('reads an Info header frame as constant bitrate, with or without a CRC', async () => {
    const info = await audio('info.mp3', xingFrame(BEST, 'Info', { frames: 50, bytes: 51 * 216 }), frames(BEST, 50));
    expect(info.summary).toMatchObject({ header_frame: 'Info', vbr: false, bitrate_kbps: 48, duration_s: 1.8 });
    expect(info.ideal).toBe(true);

    const crc = { ...BEST, crc: true };
    const withCrc = await audio('crc.mp3', xingFrame(crc, 'Info', { frames: 51 }), frames(crc, 50));
    expect(withCrc.summary).toMatchObject({ header_frame: 'Info', vbr: false, duration_s: 1.836 });
  });

  it('reads a VBRI header frame: variable bitrate, its frame count for the duration', async () => {
    const body = vbrFrames(30);
    const check = await audio('vbri.mp3', vbriFrame(BEST, { frames: 31, bytes: body.length }), body);
    expect(check.summary).toMatchObject({ header_frame: 'VBRI', vbr: true, duration_s: 1.116, bitrate_kbps: 48 });
    expect(codes(check)).toEqual(['vbr']);
  });

  it('counts the frames after leading junk and across a damaged stretch', async () => {
    const junk = noise(1000, 7);
    const check = await audio('junk.mp3', junk, frames(BEST, 30), noise(333, 11), frames(BEST, 30));
    expect(check.summary.duration_s).toBe(2.16);
    expect(check.summary.size_bytes).toBe(1000 + 60 * 216 + 333);
  });

  it('finds the frames past a stretch of junk longer than the read window, and walks across window edges', async () => {
    const check = await audio('far.mp3', noise(1_500_000, 3), frames(BEST, 5000), noise(5000, 5), frames(BEST, 5000));
    expect(check.summary.duration_s).toBe(360);
  });

  it('leaves out a last frame cut short, and accepts a stream of two frames that ends the file', async () => {
    const cut = await audio('cut.mp3', frames(BEST, 30), frame(BEST).subarray(0, 100));
    expect(cut.summary.duration_s).toBe(1.08);
    const two = await audio('two.mp3', frames(BEST, 2));
    expect(two.summary.duration_s).toBe(0.072);
  });

  it('warns about a clip longer than 60 s only as a note', async () => {
    expect(codes(await audio('short.mp3', frames(BEST, 1666)))).toEqual([]); // 59.976 s
    const long = await audio('long.mp3', frames(BEST, 1668)); // 60.048 s
    expect(long.summary.duration_s).toBe(60.048);
    expect(long.issues).toEqual([{ code: 'long_clip', severity: 'info', message: expect.stringContaining('60 s') }]);
    expect(long.ideal).toBe(true);
  });

  it('notes an extension that is not lower case', async () => {
    for (const name of ['chime.MP3', 'chime.Mp3']) {
      const check = await audio(name, frames(BEST, 10));
      expect(check.issues).toEqual([{ code: 'uppercase_extension', severity: 'info', message: expect.stringContaining(name.slice(-4)) }]);
      expect(check).toMatchObject({ ideal: true, fixable: true });
    }
    expect(codes(await audio('chime.mp3', frames(BEST, 10)))).toEqual([]);
  });
});

describe('Audio check: tags', () => {
  it('skips an ID3v2.3 tag with cover art, counts its bytes and warns; frames inside the picture do not count', async () => {
    // The picture holds MPEG-1 frames: a check that did not skip the tag would find them first.
    const image = frames({ version: '1', layer: 3, bitrateKbps: 128, sampleRateHz: 44100, mode: 'stereo' }, 5);
    const tag = id3v2(3, [textFrame('TIT2', 'Doorbell'), pictureFrame(3, image)]);
    const check = await audio('art.mp3', tag, frames(BEST, 50));
    expect(tag.length).toBeLessThan(4096);
    expect(check.summary).toMatchObject({ format: 'MPEG-2 Layer III', sample_rate_hz: 16000, cover_art: true, tag_bytes: tag.length, duration_s: 1.8, size_bytes: tag.length + 50 * 216 });
    expect(check.issues).toEqual([{ code: 'large_tags', severity: 'warn', message: expect.stringContaining('cover art') }]);
    expect(check).toMatchObject({ playable: true, ideal: false, fixable: true });
  });

  it('finds cover art in ID3v2.2 (PIC), v2.4 and an unsynchronised v2.3 tag', async () => {
    const image = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0xff, 0x00, 0xff, 0xfb, 0x90, 0x64, 0xff, 0xd9]);
    // The title's 0xFF bytes gain a 0x00 each from unsynchronisation: a reader that did not undo it would lose its place before the picture.
    const unsynchronised = id3v2(3, [textFrame('TIT2', '\u00ff\u00ff\u00ff\u00ff'), pictureFrame(3, image)], { unsync: true });
    for (const tag of [id3v2(2, [pictureFrame(2, image)]), id3v2(4, [textFrame('TIT2', 'x'), pictureFrame(4, image)]), unsynchronised]) {
      const check = await audio('art.mp3', tag, frames(BEST, 10));
      expect(check.summary).toMatchObject({ cover_art: true, tag_bytes: tag.length, duration_s: 0.36 });
    }
  });

  it('counts small ID3v2.4 (with footer) and ID3v1 tags without a warning', async () => {
    const v2 = id3v2(4, [textFrame('TIT2', 'Chime'), textFrame('TPE1', 'Fleet')], { footer: true });
    const check = await audio('small.mp3', v2, frames(BEST, 50), id3v1('Chime'));
    expect(check.summary).toMatchObject({ cover_art: false, tag_bytes: v2.length + 128, duration_s: 1.8 });
    expect(v2.subarray(-10, -7).toString('latin1')).toBe('3DI');
    expect(check.issues).toEqual([]);
  });

  it('warns about tags above 4 KB without cover art', async () => {
    const atLimit = id3v2(3, [textFrame('TIT2', 'x')], { padding: 4096 - 10 - 12 });
    expect(atLimit.length).toBe(4096);
    expect(codes(await audio('t4096.mp3', atLimit, frames(BEST, 10)))).toEqual([]);
    const over = id3v2(3, [textFrame('TIT2', 'x')], { padding: 4096 - 10 - 12 + 1 });
    const check = await audio('t4097.mp3', over, frames(BEST, 10));
    expect(check.summary).toMatchObject({ tag_bytes: 4097, cover_art: false });
    expect(check.issues).toEqual([{ code: 'large_tags', severity: 'warn', message: expect.stringContaining('4097 bytes') }]);
  });

  it('counts APEv2, Lyrics3v2, ID3v1 and an appended ID3v2.4 tag at the end', async () => {
    const ape = apeTag({ Title: 'Chime', Artist: 'Fleet' });
    const lyrics = lyrics3v2('ding dong');
    const appended = id3v2(4, [textFrame('TIT2', 'Chime')], { footer: true });
    const check = await audio('end.mp3', frames(BEST, 50), ape, lyrics, appended, id3v1('Chime'));
    expect(check.summary).toMatchObject({ tag_bytes: ape.length + lyrics.length + appended.length + 128, duration_s: 1.8, cover_art: false });
    expect(check.issues).toEqual([]);
  });

  it('refuses a file of tags alone', async () => {
    const v = await verdict('tags.mp3', id3v2(3, [textFrame('TIT2', 'x')]), id3v1('x'));
    expect(v).toEqual({ ok: false, code: 'not_mp3', reason: expect.stringContaining('no audio') });
  });
});

describe('Audio check: size', () => {
  // MPEG-1 Layer III, 48 kHz, 320 kbps: 960-byte frames of 24 ms.
  const loud: FrameSpec = { version: '1', layer: 3, bitrateKbps: 320, sampleRateHz: 48000, mode: 'mono' };
  // MPEG-2 Layer III, 16 kHz mono, 56 kbps: 252-byte frames of 36 ms, already close to the best.
  const lean: FrameSpec = { ...BEST, bitrateKbps: 56 };

  it('a file larger than the device storage is an error: not playable, fixable when the audio at 48 kbps would fit; most serious first', async () => {
    const check = await audio('big.mp3', frames(loud, 10_700));
    expect(check.summary.size_bytes).toBe(10_272_000);
    expect(check.summary.size_bytes).toBeGreaterThan(STORAGE);
    expect(check.summary).toMatchObject({ device_storage_pct: 100.47, duration_s: 256.8 });
    expect(check.issues.map((i) => [i.code, i.severity])).toEqual([
      ['too_big', 'error'],
      ['high_sample_rate', 'warn'],
      ['high_bitrate', 'warn'],
      ['long_clip', 'info'],
    ]);
    expect(issue(check, 'too_big')!.message).toContain('9.75 MB');
    expect(check).toMatchObject({ playable: false, ideal: false, fixable: true });
  });

  it('a file too long to fit even at 48 kbps is not fixable', async () => {
    const check = await audio('huge.mp3', frames(lean, 48_000)); // 1728 s, 12.1 MB; 10.4 MB at 48 kbps
    expect(check.summary).toMatchObject({ size_bytes: 12_096_000, duration_s: 1728, device_storage_pct: 118.31 });
    expect(codes(check)).toEqual(['too_big', 'long_clip']);
    expect(check).toMatchObject({ playable: false, ideal: false, fixable: false });
  });

  it('warns about a file above a quarter of the storage, fixable when the audio at 48 kbps would take less', async () => {
    const check = await audio('large.mp3', frames({ ...loud, mode: 'stereo' }, 2700)); // 2,592,000 bytes, 64.8 s
    expect(check.summary).toMatchObject({ size_bytes: 2_592_000, device_storage_pct: 25.35 });
    expect(check.issues.map((i) => [i.code, i.severity])).toEqual([
      ['large_file', 'warn'],
      ['stereo', 'warn'],
      ['high_sample_rate', 'warn'],
      ['high_bitrate', 'warn'],
      ['long_clip', 'info'],
    ]);
    expect(issue(check, 'large_file')!.message).toContain('25.35%');
    expect(check).toMatchObject({ playable: true, ideal: false, fixable: true });
  });

  it('a large file whose audio would stay large at 48 kbps is not fixable', async () => {
    const check = await audio('lengthy.mp3', frames(lean, 11_900)); // 428.4 s: 2.57 MB at 48 kbps
    expect(codes(check)).toEqual(['large_file', 'long_clip']);
    expect(check).toMatchObject({ playable: true, ideal: false, fixable: false });
  });

  it('does not warn at a quarter of the storage or below', async () => {
    const quarter = STORAGE / 4; // 2,555,904 bytes: 11,832 frames of 216 bytes and 192 bytes of zeros
    const check = await audio('quarter.mp3', frames(BEST, 11_832), Buffer.alloc(quarter - 11_832 * 216));
    expect(check.summary.size_bytes).toBe(quarter);
    expect(check.summary.device_storage_pct).toBe(25);
    expect(codes(check)).toEqual(['long_clip']);
  });
});

describe('Audio check: a file without MP3 audio is refused', () => {
  it('a WAV named .mp3 is not_mp3, named as a WAV', async () => {
    const v = await verdict('tone.mp3', wav(2));
    expect(v).toEqual({ ok: false, code: 'not_mp3', reason: expect.stringContaining('WAV') });
  });

  it('random bytes, an empty file and a lone frame are not_mp3', async () => {
    expect(await verdict('noise.mp3', noise(256 * 1024))).toMatchObject({ ok: false, code: 'not_mp3' });
    expect(await verdict('empty.mp3')).toEqual({ ok: false, code: 'not_mp3', reason: expect.stringContaining('empty') });
    expect(await verdict('one.mp3', frame(BEST))).toMatchObject({ ok: false, code: 'not_mp3' });
  });

  it('headers that turn up alone or in pairs inside other bytes do not make a stream', async () => {
    const bytes = noise(64 * 1024, 42);
    for (let at = 100; at + 1000 < bytes.length; at += 1000) header(BEST).copy(bytes, at);
    frames(BEST, 2).copy(bytes, 30_000); // two frames in a row, then noise again
    const v = await verdict('sprinkled.mp3', bytes);
    expect(v).toMatchObject({ ok: false, code: 'not_mp3' });
  });

  it('MP2 (Layer II) is not_layer3, also behind an ID3 tag and at MPEG-2 rates', async () => {
    const mp2: FrameSpec = { version: '1', layer: 2, bitrateKbps: 192, sampleRateHz: 48000, mode: 'stereo' };
    expect(await verdict('mp2.mp3', frames(mp2, 50))).toEqual({ ok: false, code: 'not_layer3', reason: expect.stringMatching(/MPEG-1 Layer II audio \(MP2\)/) });
    expect(await verdict('tagged-mp2.mp3', id3v2(3, [textFrame('TIT2', 'x')]), frames(mp2, 50), id3v1('x'))).toMatchObject({ ok: false, code: 'not_layer3' });
    const lsf: FrameSpec = { version: '2', layer: 2, bitrateKbps: 64, sampleRateHz: 24000, mode: 'mono' };
    expect(await verdict('lsf.mp3', frames(lsf, 50))).toEqual({ ok: false, code: 'not_layer3', reason: expect.stringContaining('MPEG-2 Layer II') });
  });

  it('MP1 (Layer I) is not_layer3', async () => {
    const mp1: FrameSpec = { version: '1', layer: 1, bitrateKbps: 384, sampleRateHz: 44100, mode: 'stereo' };
    expect(await verdict('mp1.mp3', frames(mp1, 50))).toEqual({ ok: false, code: 'not_layer3', reason: expect.stringContaining('(MP1)') });
  });
});
