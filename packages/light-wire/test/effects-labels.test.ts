import {
  apiEffectToWire,
  capViolation,
  colorToRgb,
  encodeEffect,
  encodeLight,
  overlayOf,
  parsePayload,
  seconds,
  stateLabel,
  UNRECOGNIZED_LABEL,
  WireError,
} from '../src';

const red = { r: 255, g: 0, b: 0 };
const green = { r: 0, g: 255, b: 0 };
const blue = { r: 0, g: 0, b: 255 };

function refusal(input: unknown, prefix = 'light'): string {
  try {
    apiEffectToWire(input, prefix);
  } catch (err) {
    if (err instanceof WireError) return err.field;
    throw err;
  }
  throw new Error(`${JSON.stringify(input)} was accepted`);
}

describe('API effect types to wire payloads', () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['Solid', { type: 'Solid', color: green }, 'solid:00FF00'],
    ['Pulse', { type: 'Pulse', color: blue, period_s: 1.2 }, 'pulse:0000FF,1200'],
    ['Chase', { type: 'Chase', color: red, period_s: 0.5, width: 3 }, 'chase:FF0000,500,3'],
    ['Toggle', { type: 'Toggle', color1: red, color2: blue, period_s: 1, duty_ratio: 0.25 }, 'toggle:FF0000,0000FF,1000,25'],
    ['BluChase', { type: 'BluChase', period_s: 0.8, brightness_per: 80 }, 'bluchase:800,80'],
    [
      'PulseThenSolid',
      { type: 'PulseThenSolid', pulse_time_s: 3, pulse_color: red, pulse_period_s: 0.5, solid_color: green, repeat_s: 60 },
      'pulsesolid:3000,FF0000,500,00FF00,60',
    ],
    [
      'ChaseThenSolid',
      { type: 'ChaseThenSolid', chase_time_s: 2.5, chase_color: red, chase_period_s: 0.3, chase_width: 12, solid_color: green, repeat_s: 0 },
      'chasesolid:2500,FF0000,300,12,00FF00,0',
    ],
    [
      'ToggleThenSolid',
      {
        type: 'ToggleThenSolid',
        toggle_time_s: 99.999,
        toggle_color1: red,
        toggle_color2: blue,
        toggle_period_s: 9.999,
        toggle_duty_ratio: 0.99,
        solid_color: { r: 18, g: 52, b: 171 },
        repeat_s: 999999,
      },
      'togglesolid:99999,FF0000,0000FF,9999,99,1234AB,999999',
    ],
  ];
  test.each(cases)('%s', (_type, input, wire) => {
    const effect = apiEffectToWire(input);
    expect(encodeEffect(effect)).toBe(wire);
    // What we produce always parses back and keeps within the caps.
    const parsed = parsePayload('light1', wire);
    expect(parsed.value).toEqual(effect);
    expect(capViolation(parsed)).toBeNull();
  });

  describe('every bound, both sides', () => {
    const pulse = (period_s: unknown) => ({ type: 'Pulse', color: red, period_s });
    const bounds: Array<[string, (v: unknown) => Record<string, unknown>, unknown[], unknown[], string]> = [
      ['period_s', pulse, [0.1, 9.999], [0.099, 10, 0.05, -1], 'light.period_s'],
      ['width', (v) => ({ type: 'Chase', color: red, period_s: 1, width: v }), [1, 12], [0, 13, 2.5], 'light.width'],
      ['duty_ratio', (v) => ({ type: 'Toggle', color1: red, color2: blue, period_s: 1, duty_ratio: v }), [0.01, 0.99], [0, 1, 0.005, 0.255], 'light.duty_ratio'],
      ['brightness_per', (v) => ({ type: 'BluChase', period_s: 1, brightness_per: v }), [0, 99], [-1, 100, 50.5], 'light.brightness_per'],
      [
        'pulse_time_s',
        (v) => ({ type: 'PulseThenSolid', pulse_time_s: v, pulse_color: red, pulse_period_s: 0.5, solid_color: green, repeat_s: 0 }),
        [0.1, 99.999],
        [0.0999, 100, 1.0005],
        'light.pulse_time_s',
      ],
      [
        'repeat_s',
        (v) => ({ type: 'PulseThenSolid', pulse_time_s: 1, pulse_color: red, pulse_period_s: 0.5, solid_color: green, repeat_s: v }),
        [0, 2, 999999],
        [1, -1, 1000000, 2.5],
        'light.repeat_s',
      ],
      ['color component', (v) => ({ type: 'Solid', color: { r: v, g: 0, b: 0 } }), [0, 255], [-1, 256, 1.5, '255'], 'light.color.r'],
    ];
    describe.each(bounds)('%s', (_name, make, good, badValues, field) => {
      test.each(good)('accepts %p', (v) => {
        expect(() => apiEffectToWire(make(v), 'light')).not.toThrow();
      });
      test.each(badValues)('refuses %p naming the field', (v) => {
        expect(refusal(make(v))).toBe(field);
      });
    });
  });

  test('a value is never rounded', () => {
    expect(() => apiEffectToWire({ type: 'Pulse', color: red, period_s: 1.0004 }, 'entries.CLEAR.light')).toThrow(
      'entries.CLEAR.light.period_s must be a multiple of 0.001 s',
    );
  });

  test('missing, extra and mistyped fields are named', () => {
    expect(refusal({ type: 'Pulse', color: red })).toBe('light.period_s');
    expect(refusal({ type: 'Pulse', color: red, period_s: 1, width: 3 })).toBe('light.width');
    expect(refusal({ type: 'Pulse', color: red, period_s: '1' })).toBe('light.period_s');
    expect(refusal({ type: 'Blink', color: red })).toBe('light.type');
    expect(refusal({ color: red })).toBe('light.type');
    expect(refusal('Solid')).toBe('light');
    expect(refusal({ type: 'Solid', color: '#FF0000' })).toBe('light.color');
    expect(refusal({ type: 'Solid', color: { r: 1, g: 2 } })).toBe('light.color.b');
    expect(refusal({ type: 'Solid', color: { r: 1, g: 2, b: 3, a: 4 } })).toBe('light.color.a');
    expect(refusal({ type: 'Pulse', color: red, period_s: Number.NaN })).toBe('light.period_s');
  });

  test('repeat_s must outlast the animation', () => {
    const make = (repeat_s: number) => ({ type: 'ChaseThenSolid', chase_time_s: 5, chase_color: red, chase_period_s: 0.5, chase_width: 2, solid_color: green, repeat_s });
    expect(refusal(make(5))).toBe('light.repeat_s');
    expect(encodeEffect(apiEffectToWire(make(6)))).toBe('chasesolid:5000,FF0000,500,2,00FF00,6');
  });

  test('colors convert both ways', () => {
    expect(colorToRgb('1234AB')).toEqual({ r: 0x12, g: 0x34, b: 0xab });
  });
});

describe('overlays from seconds', () => {
  const effect = apiEffectToWire({ type: 'Pulse', color: red, period_s: 1 });
  test('duration_s and interval_s become milliseconds', () => {
    expect(encodeLight(overlayOf(effect, { duration_s: 5, interval_s: 60 }))).toBe('pulse:FF0000,1000@5000/60000');
    expect(encodeLight(overlayOf(effect, { duration_s: 0.1, interval_s: 0 }))).toBe('pulse:FF0000,1000@100/0');
    expect(encodeLight(overlayOf(effect, { duration_s: 600, interval_s: 86400 }))).toBe('pulse:FF0000,1000@600000/86400000');
    expect(encodeLight(overlayOf(effect, { duration_s: 1, interval_s: 10 }))).toBe('pulse:FF0000,1000@1000/10000');
  });
  test.each([
    [{ duration_s: 0.099, interval_s: 0 }, 'params.duration_s'],
    [{ duration_s: 600.001, interval_s: 0 }, 'params.duration_s'],
    [{ duration_s: 5, interval_s: 9.999 }, 'params.interval_s'],
    [{ duration_s: 5, interval_s: 86400.001 }, 'params.interval_s'],
    [{ duration_s: 5, interval_s: -1 }, 'params.interval_s'],
    [{ duration_s: '5', interval_s: 10 }, 'params.duration_s'],
    [{ duration_s: 5, interval_s: 10.0001 }, 'params.interval_s'],
  ])('%p is refused naming %s (caps always apply)', (timing, field) => {
    try {
      overlayOf(effect, timing, 'params');
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(WireError);
      expect((err as WireError).field).toBe(field);
    }
  });
  test("'off' cannot be an overlay", () => {
    expect(() => overlayOf({ kind: 'off' }, { duration_s: 5, interval_s: 0 })).toThrow(WireError);
  });
});

describe('human labels', () => {
  const labels: Array<[string, string, string]> = [
    ['light1', '', 'Off'],
    ['light1', 'off', 'Off'],
    ['light1', 'solid:00FF00', 'Solid #00FF00'],
    ['light1', 'pulse:FF0000,1200', 'Pulse #FF0000 every 1.2 s'],
    ['light1', 'chase:FF0000,500,3', 'Chase #FF0000 every 0.5 s, width 3'],
    ['light1', 'toggle:FF0000,0000FF,1000,25', 'Toggle #FF0000/#0000FF every 1 s, 25% duty'],
    ['light1', 'bluchase:800,80', 'Blue chase every 0.8 s at 80% brightness'],
    ['light1', 'pulsesolid:3000,FF0000,500,00FF00,60', 'Pulse #FF0000 every 0.5 s for 3 s, then solid #00FF00, repeating every 60 s'],
    ['light1', 'chasesolid:3000,FF0000,500,4,00FF00,0', 'Chase #FF0000 every 0.5 s, width 4, for 3 s, then solid #00FF00, once'],
    [
      'light1',
      'togglesolid:5000,FF0000,0000FF,400,25,00FF00,3600',
      'Toggle #FF0000/#0000FF every 0.4 s, 25% duty, for 5 s, then solid #00FF00, repeating every 3600 s',
    ],
    ['light2', 'pulse:FF0000,1000@5000/60000', 'Overlay: Pulse #FF0000 every 1 s for 5 s every 60 s'],
    ['light3', 'solid:FFFFFF@1500/0', 'Overlay: Solid #FFFFFF for 1.5 s once'],
    ['sound', 'play:chime.mp3,50', 'Play chime.mp3 at volume 50%'],
    ['sound', 'play:chime.mp3,50,1', 'Play chime.mp3 at volume 50%, 1 time'],
    ['sound', 'play:chime.mp3,50,3', 'Play chime.mp3 at volume 50%, 3 times'],
    ['sound', 'stop', 'Stopped'],
    ['sound', '', 'Off'],
    ['contact', 'on', 'On'],
    ['contact', 'off', 'Off'],
    ['contact', 'pulse:250', 'Pulse for 0.25 s'],
    ['light1', 'pulse:FF0000,20', 'Pulse #FF0000 every 0.02 s'],
    ['light1', 'garbage', UNRECOGNIZED_LABEL],
    ['light1', 'pulse:FF0000@1000/0', UNRECOGNIZED_LABEL],
    ['contact', 'pulse:1', UNRECOGNIZED_LABEL],
  ];
  test.each(labels)('%s %j → %s', (channel, payload, label) => {
    expect(stateLabel(channel, payload)).toBe(label);
  });
  test('seconds', () => {
    expect(seconds(1)).toBe('0.001 s');
    expect(seconds(86_400_000)).toBe('86400 s');
  });
});
