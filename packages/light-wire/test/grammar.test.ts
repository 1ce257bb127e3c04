import { capViolation, encodePayload, parsePayload, WireError, type WirePayload } from '../src';

function fieldOf(channel: string, payload: string): string {
  try {
    parsePayload(channel, payload);
  } catch (err) {
    if (err instanceof WireError) return err.field;
    throw err;
  }
  throw new Error(`'${payload}' on ${channel} was accepted`);
}

const caps = (channel: string, payload: string) => capViolation(parsePayload(channel, payload))?.field ?? null;

describe('every payload form round-trips byte for byte', () => {
  const forms: Array<[string, string]> = [
    ['light1', 'off'],
    ['light1', 'solid:FF0000'],
    ['light1', 'pulse:00FF00,1200'],
    ['light1', 'chase:0000FF,500,3'],
    ['light1', 'toggle:FF0000,0000FF,1000,50'],
    ['light1', 'bluchase:800,80'],
    ['light1', 'pulsesolid:3000,FF0000,500,00FF00,60'],
    ['light1', 'chasesolid:3000,FF0000,500,4,00FF00,0'],
    ['light1', 'togglesolid:5000,FF0000,0000FF,400,25,00FF00,3600'],
    ['light2', 'pulse:FF0000,1000@5000/60000'],
    ['light3', 'solid:FFFFFF@100/0'],
    ['light2', 'togglesolid:5000,FF0000,0000FF,400,25,00FF00,0@3600000/86400000'],
    ['light2', 'bluchase:100,0'],
    ['light3', 'off'],
    ['sound', 'play:chime.mp3,50'],
    ['sound', 'play:alarm_2-b.wav,100,3'],
    ['sound', 'stop'],
    ['sound', 'off'],
    ['contact', 'on'],
    ['contact', 'off'],
    ['contact', 'pulse:500'],
  ];
  test.each(forms)('%s %s', (channel, payload) => {
    expect(encodePayload(parsePayload(channel, payload))).toBe(payload);
  });

  test('colors parse in either case and encode upper case', () => {
    const parsed = parsePayload('light1', 'solid:ff00aa');
    expect(parsed.value).toEqual({ kind: 'solid', color: 'FF00AA' });
    expect(encodePayload(parsed)).toBe('solid:FF00AA');
  });

  test('the parsed structure names every field', () => {
    expect(parsePayload('light2', 'chasesolid:3000,FF0000,500,4,00FF00,10@5000/0')).toEqual<WirePayload>({
      channel: 'light2',
      value: {
        kind: 'overlay',
        effect: { kind: 'chasesolid', chase_ms: 3000, chase_color: 'FF0000', period_ms: 500, width: 4, solid_color: '00FF00', repeat_s: 10 },
        duration_ms: 5000,
        interval_ms: 0,
      },
    });
    expect(parsePayload('sound', 'play:a.mp3,7,2')).toEqual({ channel: 'sound', value: { kind: 'play', file: 'a.mp3', volume_pct: 7, count: 2 } });
    expect(parsePayload('contact', 'pulse:50')).toEqual({ channel: 'contact', value: { kind: 'pulse', pulse_ms: 50 } });
  });
});

describe('grammar bounds, both sides of each', () => {
  const cases: Array<[string, string, string, string, string]> = [
    // [name, channel, template with #, lowest-1/highest+1 bad, field]
    ['period', 'light1', 'pulse:FF0000,#', '20|9999', 'period_ms'],
    ['chase period', 'light1', 'chase:FF0000,#,3', '20|9999', 'period_ms'],
    ['toggle period', 'light1', 'toggle:FF0000,00FF00,#,50', '20|9999', 'period_ms'],
    ['bluchase period', 'light1', 'bluchase:#,50', '20|9999', 'period_ms'],
    ['width', 'light1', 'chase:FF0000,500,#', '1|12', 'width'],
    ['duty', 'light1', 'toggle:FF0000,00FF00,500,#', '1|99', 'duty_pct'],
    ['brightness', 'light1', 'bluchase:500,#', '0|99', 'brightness_pct'],
    ['pulse animation', 'light1', 'pulsesolid:#,FF0000,500,00FF00,0', '100|99999', 'pulse_ms'],
    ['chase animation', 'light1', 'chasesolid:#,FF0000,500,3,00FF00,0', '100|99999', 'chase_ms'],
    ['toggle animation', 'light1', 'togglesolid:#,FF0000,00FF00,500,50,00FF00,0', '100|99999', 'toggle_ms'],
    ['composite period', 'light1', 'pulsesolid:1000,FF0000,#,00FF00,0', '20|9999', 'period_ms'],
    ['repeat', 'light1', 'pulsesolid:1000,FF0000,500,00FF00,#', '2|999999', 'repeat_s'],
    ['volume', 'sound', 'play:a.mp3,#', '0|100', 'volume_pct'],
    ['count', 'sound', 'play:a.mp3,50,#', '1|100', 'count'],
    ['overlay duration', 'light2', 'solid:FF0000@#/0', '100|3600000', 'duration_ms'],
    ['overlay interval', 'light3', 'solid:FF0000@1000/#', '1000|86400000', 'interval_ms'],
    ['contact pulse', 'contact', 'pulse:#', '50|60000', 'pulse_ms'],
  ];
  describe.each(cases)('%s', (_name, channel, template, range, field) => {
    const [lo, hi] = range.split('|').map(Number) as [number, number];
    const at = (n: number) => template.replace('#', String(n));
    test(`accepts ${lo} and ${hi}`, () => {
      expect(encodePayload(parsePayload(channel, at(lo)))).toBe(at(lo));
      expect(encodePayload(parsePayload(channel, at(hi)))).toBe(at(hi));
    });
    test(`refuses ${lo - 1} and ${hi + 1}, naming ${field}`, () => {
      if (lo - 1 >= 0 && !(field === 'repeat_s' && lo - 1 === 0) && !(field === 'interval_ms' && lo - 1 === 0)) {
        expect(fieldOf(channel, at(lo - 1))).toBe(field);
      }
      expect(fieldOf(channel, at(hi + 1))).toBe(field);
    });
  });

  test('repeat_s 0 plays once; otherwise it must outlast the animation', () => {
    expect(parsePayload('light1', 'pulsesolid:1000,FF0000,500,00FF00,0').value).toMatchObject({ repeat_s: 0 });
    expect(fieldOf('light1', 'pulsesolid:1000,FF0000,500,00FF00,1')).toBe('repeat_s');
    expect(fieldOf('light1', 'chasesolid:5000,FF0000,500,3,00FF00,5')).toBe('repeat_s');
    expect(parsePayload('light1', 'chasesolid:5000,FF0000,500,3,00FF00,6').value).toMatchObject({ repeat_s: 6 });
    expect(fieldOf('light1', 'togglesolid:99999,FF0000,00FF00,500,50,00FF00,99')).toBe('repeat_s');
    expect(parsePayload('light1', 'togglesolid:99999,FF0000,00FF00,500,50,00FF00,100').value).toMatchObject({ repeat_s: 100 });
  });

  test('overlay interval 0 means once; 1..999 is refused', () => {
    expect(parsePayload('light2', 'solid:FF0000@1000/0').value).toMatchObject({ interval_ms: 0 });
    expect(fieldOf('light2', 'solid:FF0000@1000/1')).toBe('interval_ms');
    expect(fieldOf('light2', 'solid:FF0000@1000/999')).toBe('interval_ms');
  });
});

describe('malformed input', () => {
  const bad: Array<[string, string, string]> = [
    ['light1', '', 'payload'],
    ['light1', 'OFF', 'payload'],
    ['light1', 'off ', 'payload'],
    ['light1', 'blink:FF0000', 'payload'],
    ['light1', 'solid', 'payload'],
    ['light1', 'solid:', 'color'],
    ['light1', 'solid:FF000', 'color'],
    ['light1', 'solid:FF00000', 'color'],
    ['light1', 'solid:#FF0000', 'color'],
    ['light1', 'solid:GG0000', 'color'],
    ['light1', 'solid:FF0000,1', 'payload'],
    ['light1', 'pulse:FF0000', 'payload'],
    ['light1', 'pulse:FF0000,500,1', 'payload'],
    ['light1', 'pulse:FF0000,0500', 'period_ms'],
    ['light1', 'pulse:FF0000,+500', 'period_ms'],
    ['light1', 'pulse:FF0000,-500', 'period_ms'],
    ['light1', 'pulse:FF0000,500.0', 'period_ms'],
    ['light1', 'pulse:FF0000, 500', 'period_ms'],
    ['light1', 'pulse:FF0000,1e3', 'period_ms'],
    ['light1', 'pulse:FF0000,', 'period_ms'],
    ['light1', 'solid:FF0000@1000/0', 'payload'],
    ['light2', 'solid:FF0000@1000', 'payload'],
    ['light2', 'solid:FF0000@1000/0/0', 'payload'],
    ['light2', 'solid:FF0000@@1000/0', 'payload'],
    ['light2', 'solid:FF0000@1000/0@1000/0', 'payload'],
    ['light2', 'off@1000/0', 'payload'],
    ['light2', '@1000/0', 'payload'],
    ['light2', 'solid:FF0000@/0', 'duration_ms'],
    ['light2', 'solid:FF0000@1000/', 'interval_ms'],
    ['light2', 'play:a.mp3,50', 'payload'],
    ['sound', 'solid:FF0000', 'payload'],
    ['sound', 'play:', 'payload'],
    ['sound', 'play:a.mp3', 'payload'],
    ['sound', 'play:a.mp3,50,1,2', 'payload'],
    ['sound', 'play:,50', 'file'],
    ['sound', 'play:a b.mp3,50', 'file'],
    ['sound', 'play:../x.mp3,50', 'file'],
    ['sound', 'play:a.mp3,50,0', 'count'],
    ['sound', 'STOP', 'payload'],
    ['contact', 'pulse', 'payload'],
    ['contact', 'pulse:', 'pulse_ms'],
    ['contact', 'pulse:abc', 'pulse_ms'],
    ['contact', 'toggle', 'payload'],
    ['contact', 'stop', 'payload'],
    ['light4', 'off', 'channel'],
    ['', 'off', 'channel'],
  ];
  test.each(bad)('%s %j is refused naming %s', (channel, payload, field) => {
    expect(fieldOf(channel, payload)).toBe(field);
  });

  test('a refusal says what is wrong', () => {
    expect(() => parsePayload('light1', 'pulse:FF0000,10')).toThrow('period_ms must be a whole number from 20 to 9999, got 10');
    expect(() => parsePayload('light1', 'solid:FF0000@1000/0')).toThrow('only for light2 and light3');
  });
});

describe('availability caps are a separate check', () => {
  test('period: 99 ms is within the grammar but beyond the cap, 100 ms keeps within it', () => {
    for (const [channel, low, ok] of [
      ['light1', 'pulse:FF0000,99', 'pulse:FF0000,100'],
      ['light1', 'chase:FF0000,99,2', 'chase:FF0000,100,2'],
      ['light1', 'toggle:FF0000,00FF00,99,50', 'toggle:FF0000,00FF00,100,50'],
      ['light1', 'bluchase:99,50', 'bluchase:100,50'],
      ['light1', 'pulsesolid:1000,FF0000,99,00FF00,0', 'pulsesolid:1000,FF0000,100,00FF00,0'],
      ['light1', 'chasesolid:1000,FF0000,99,2,00FF00,0', 'chasesolid:1000,FF0000,100,2,00FF00,0'],
      ['light1', 'togglesolid:1000,FF0000,00FF00,99,50,00FF00,0', 'togglesolid:1000,FF0000,00FF00,100,50,00FF00,0'],
      ['light2', 'pulse:FF0000,99@1000/0', 'pulse:FF0000,100@1000/0'],
      ['light3', 'pulse:FF0000,20', 'pulse:FF0000,9999'],
    ] as const) {
      expect(caps(channel, low)).toBe('period_ms');
      expect(caps(channel, ok)).toBeNull();
    }
  });

  test('overlay duration at most 600000 ms', () => {
    expect(caps('light2', 'solid:FF0000@600000/0')).toBeNull();
    expect(caps('light2', 'solid:FF0000@600001/0')).toBe('duration_ms');
    expect(caps('light3', 'solid:FF0000@3600000/0')).toBe('duration_ms');
  });

  test('overlay interval 0 or at least 10000 ms', () => {
    expect(caps('light2', 'solid:FF0000@1000/0')).toBeNull();
    expect(caps('light2', 'solid:FF0000@1000/10000')).toBeNull();
    expect(caps('light2', 'solid:FF0000@1000/9999')).toBe('interval_ms');
    expect(caps('light3', 'solid:FF0000@1000/1000')).toBe('interval_ms');
  });

  test('contact pulse at most 10000 ms', () => {
    expect(caps('contact', 'pulse:10000')).toBeNull();
    expect(caps('contact', 'pulse:10001')).toBe('pulse_ms');
    expect(caps('contact', 'pulse:60000')).toBe('pulse_ms');
    expect(caps('contact', 'on')).toBeNull();
  });

  test('forms without caps', () => {
    for (const [channel, payload] of [
      ['light1', 'off'],
      ['light1', 'solid:FF0000'],
      ['sound', 'play:a.mp3,100,100'],
      ['sound', 'stop'],
      ['contact', 'off'],
    ] as const) {
      expect(caps(channel, payload)).toBeNull();
    }
  });
});
