import { formatName, parseFrameHeader } from '../src/domain/audio/frame-header';
import { readHeaderFrame } from '../src/domain/audio/header-frame';
import { BEST, frameBytes, header, xingFrame } from './audio/mpeg-writer';

const parse = (...bytes: number[]) => parseFrameHeader(Uint8Array.from(bytes), 0);

describe('MPEG audio frame headers', () => {
  it('reads the common MPEG-1 Layer III header FF FB 90 64 (128 kbps, 44.1 kHz, joint stereo, 417 bytes)', () => {
    expect(parse(0xff, 0xfb, 0x90, 0x64)).toEqual({
      version: '1',
      layer: 3,
      crc: false,
      bitrateKbps: 128,
      sampleRateHz: 44100,
      padding: false,
      channelMode: 'joint_stereo',
      samples: 1152,
      length: 417,
    });
    expect(parse(0xff, 0xfb, 0x92, 0x64)).toMatchObject({ padding: true, length: 418 });
    expect(parse(0xff, 0xfa, 0x90, 0x64)).toMatchObject({ crc: true, length: 417 });
  });

  it('reads MPEG-2 and MPEG-2.5 Layer III, whose frames hold 576 samples', () => {
    expect(parse(0xff, 0xf3, 0x68, 0xc0)).toMatchObject({ version: '2', layer: 3, bitrateKbps: 48, sampleRateHz: 16000, channelMode: 'mono', samples: 576, length: 216 });
    expect(parse(0xff, 0xe3, 0x18, 0x40)).toMatchObject({ version: '2.5', layer: 3, bitrateKbps: 8, sampleRateHz: 8000, channelMode: 'joint_stereo', samples: 576, length: 72 });
    expect(parse(0xff, 0xe3, 0xe4, 0x80)).toMatchObject({ version: '2.5', bitrateKbps: 160, sampleRateHz: 12000, channelMode: 'dual_channel', length: 960 });
  });

  it('reads Layer I and II frames with their own tables and lengths', () => {
    // MPEG-1 Layer II, 192 kbps, 48 kHz, stereo: 144 * 192000 / 48000 = 576 bytes.
    expect(parse(0xff, 0xfd, 0xa4, 0x00)).toMatchObject({ version: '1', layer: 2, bitrateKbps: 192, sampleRateHz: 48000, channelMode: 'stereo', samples: 1152, length: 576 });
    // MPEG-1 Layer I, 384 kbps, 44.1 kHz, padded: (12 * 384000 / 44100 + 1) * 4 = 420 bytes.
    expect(parse(0xff, 0xff, 0xc2, 0x00)).toMatchObject({ layer: 1, bitrateKbps: 384, samples: 384, length: 420 });
    // MPEG-2 Layer II, 160 kbps (the top of the low-sample-rate table), 24 kHz: 960 bytes, 1152 samples.
    expect(parse(0xff, 0xf5, 0xe4, 0xc0)).toMatchObject({ version: '2', layer: 2, bitrateKbps: 160, sampleRateHz: 24000, samples: 1152, length: 960 });
  });

  it('refuses what is not a frame header', () => {
    expect(parse(0xff, 0xfb, 0x00, 0x64)).toBeNull(); // free format: the length is not in the header
    expect(parse(0xff, 0xfb, 0xf0, 0x64)).toBeNull(); // bitrate index 15 is forbidden
    expect(parse(0xff, 0xfb, 0x9c, 0x64)).toBeNull(); // sample rate index 3 is reserved
    expect(parse(0xff, 0xeb, 0x90, 0x64)).toBeNull(); // version '01' is reserved
    expect(parse(0xff, 0xf9, 0x90, 0x64)).toBeNull(); // layer '00' is reserved
    expect(parse(0xff, 0xfb, 0x90, 0x66)).toBeNull(); // emphasis '10' is reserved
    expect(parse(0xff, 0xe5, 0x18, 0x40)).toBeNull(); // MPEG-2.5 exists for Layer III only
    expect(parse(0xfe, 0xfb, 0x90, 0x64)).toBeNull(); // no sync
    expect(parse(0xff, 0xfb, 0x90)).toBeNull(); // cut short
  });

  it('names the format', () => {
    expect(formatName({ version: '1', layer: 3 })).toBe('MPEG-1 Layer III');
    expect(formatName({ version: '2', layer: 2 })).toBe('MPEG-2 Layer II');
    expect(formatName({ version: '2.5', layer: 3 })).toBe('MPEG-2.5 Layer III');
  });

  it('agrees with the test writer, whose tables are written out separately', () => {
    expect([...header(BEST)]).toEqual([0xff, 0xf3, 0x68, 0xc0]);
    expect([...header({ version: '1', layer: 3, bitrateKbps: 128, sampleRateHz: 44100, mode: 'joint_stereo' })]).toEqual([0xff, 0xfb, 0x90, 0x40]);
    expect(frameBytes({ version: '1', layer: 3, bitrateKbps: 320, sampleRateHz: 48000, mode: 'mono' })).toBe(960);
    for (const version of ['1', '2', '2.5'] as const) {
      const spec = { version, layer: 3 as const, bitrateKbps: 32, sampleRateHz: version === '1' ? 32000 : version === '2' ? 22050 : 11025, mode: 'stereo' as const, padding: true };
      expect(parse(...header(spec))).toMatchObject({ version, bitrateKbps: 32, sampleRateHz: spec.sampleRateHz, length: frameBytes(spec) });
    }
  });

  it('finds the Xing tag after the side information, and after the CRC when the frame has one', () => {
    for (const spec of [BEST, { ...BEST, crc: true }, { version: '1', layer: 3, bitrateKbps: 128, sampleRateHz: 44100, mode: 'stereo' } as const]) {
      const bytes = xingFrame(spec, 'Xing', { frames: 1234, bytes: 56789 });
      expect(readHeaderFrame(bytes, parseFrameHeader(bytes, 0)!)).toEqual({ kind: 'Xing', frames: 1234, bytes: 56789 });
    }
    const noBytes = xingFrame(BEST, 'Info', { frames: 7 });
    expect(readHeaderFrame(noBytes, parseFrameHeader(noBytes, 0)!)).toEqual({ kind: 'Info', frames: 7, bytes: null });
  });
});
