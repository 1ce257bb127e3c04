import { capViolation, encodePayload, parsePayload, type LightChannel } from '@fleet/light-wire';
import { AdminError, parseBound } from '../src/admin/commands';
import { availableCommands, buildCommand, CATALOG, checkNarrowing, CommandInputError, describeCommand, findCommand, type Bounds, type CommandOverride } from '../src/domain/catalog';
import { checkRawCommand } from '../src/domain/raw';
import { stateReportOf } from '../src/handlers/state-consumer';

const cmd = (name: string) => {
  const def = findCommand(name);
  if (!def) throw new Error(`no command ${name}`);
  return def;
};
const wire = (name: string, channel: LightChannel, params: Record<string, unknown> = {}, bounds: Bounds = {}) =>
  encodePayload(buildCommand(cmd(name), channel, params, bounds));

function refusedField(name: string, channel: LightChannel, params: Record<string, unknown>, bounds: Bounds = {}): string {
  try {
    buildCommand(cmd(name), channel, params, bounds);
  } catch (err) {
    if (err instanceof CommandInputError) return err.field;
    throw err;
  }
  throw new Error(`${name} ${JSON.stringify(params)} was accepted`);
}

describe('the predefined catalog', () => {
  test('every command on every channel builds, with defaults, a payload within the grammar and the caps', () => {
    for (const def of CATALOG) {
      for (const channel of def.channels) {
        const payload = wire(def.name, channel);
        const parsed = parsePayload(channel, payload);
        expect(capViolation(parsed)).toBeNull();
        expect(encodePayload(parsed)).toBe(payload);
      }
    }
  });

  test.each([
    ['off', 'light1', {}, 'off'],
    ['off', 'sound', {}, 'off'],
    ['off', 'contact', {}, 'off'],
    ['off', 'light2', {}, 'off'],
    ['solid', 'light1', { color: '00ff00' }, 'solid:00FF00'],
    ['pulse', 'light1', { color: 'FF0000', period_s: 1.2 }, 'pulse:FF0000,1200'],
    ['chase', 'light1', { color: 'FF0000', period_s: 0.5, width: 4 }, 'chase:FF0000,500,4'],
    ['toggle', 'light1', { color1: 'FF0000', color2: '0000FF', period_s: 1, duty_ratio: 0.3 }, 'toggle:FF0000,0000FF,1000,30'],
    ['bluchase', 'light1', { period_s: 0.8, brightness_pct: 60 }, 'bluchase:800,60'],
    ['pulse_then_solid', 'light1', { pulse_time_s: 3, pulse_color: 'FF0000', period_s: 0.5, solid_color: '00FF00', repeat_s: 60 }, 'pulsesolid:3000,FF0000,500,00FF00,60'],
    ['chase_then_solid', 'light1', { chase_time_s: 2, width: 5, repeat_s: 0 }, 'chasesolid:2000,FF0000,500,5,00FF00,0'],
    ['toggle_then_solid', 'light1', { toggle_time_s: 4, duty_ratio: 0.25, repeat_s: 30 }, 'togglesolid:4000,FF0000,0000FF,1000,25,00FF00,30'],
    ['pulse', 'light2', { color: 'FF0000', period_s: 1, duration_s: 5, interval_s: 60 }, 'pulse:FF0000,1000@5000/60000'],
    ['solid', 'light3', { color: 'FFFFFF', duration_s: 1.5, interval_s: 0 }, 'solid:FFFFFF@1500/0'],
    ['pulse', 'light3', {}, 'pulse:0000FF,1000@5000/60000'],
    ['sound_play', 'sound', { file: 'alarm.mp3', volume: 80, count: 3 }, 'play:alarm.mp3,80,3'],
    ['sound_play', 'sound', {}, 'play:chime.mp3,50,1'],
    ['sound_stop', 'sound', {}, 'stop'],
    ['contact_on', 'contact', {}, 'on'],
    ['contact_pulse', 'contact', { pulse_s: 0.25 }, 'pulse:250'],
  ] as const)('%s on %s %j → %s', (name, channel, params, payload) => {
    expect(wire(name, channel, params)).toBe(payload);
  });

  test.each([
    // both sides of each catalog bound, never clamped
    ['pulse', 'light1', { period_s: 0.099 }, 'params.period_s'],
    ['pulse', 'light1', { period_s: 10 }, 'params.period_s'],
    ['pulse', 'light1', { period_s: 1.0001 }, 'params.period_s'],
    ['chase', 'light1', { width: 0 }, 'params.width'],
    ['chase', 'light1', { width: 13 }, 'params.width'],
    ['toggle', 'light1', { duty_ratio: 0 }, 'params.duty_ratio'],
    ['toggle', 'light1', { duty_ratio: 1 }, 'params.duty_ratio'],
    ['toggle', 'light1', { duty_ratio: 0.333 }, 'params.duty_ratio'],
    ['bluchase', 'light1', { brightness_pct: -1 }, 'params.brightness_pct'],
    ['bluchase', 'light1', { brightness_pct: 100 }, 'params.brightness_pct'],
    ['pulse_then_solid', 'light1', { pulse_time_s: 0.05 }, 'params.pulse_time_s'],
    ['pulse_then_solid', 'light1', { pulse_time_s: 100 }, 'params.pulse_time_s'],
    ['pulse_then_solid', 'light1', { repeat_s: 1000000 }, 'params.repeat_s'],
    ['pulse_then_solid', 'light1', { pulse_time_s: 5, repeat_s: 5 }, 'params.repeat_s'],
    ['pulse', 'light2', { duration_s: 0.05 }, 'params.duration_s'],
    ['pulse', 'light2', { duration_s: 600.001 }, 'params.duration_s'],
    ['pulse', 'light2', { interval_s: 9.999 }, 'params.interval_s'],
    ['pulse', 'light2', { interval_s: 86401 }, 'params.interval_s'],
    ['sound_play', 'sound', { volume: 101 }, 'params.volume'],
    ['sound_play', 'sound', { volume: -1 }, 'params.volume'],
    ['sound_play', 'sound', { count: 0 }, 'params.count'],
    // a whole step takes whole values only: these would go on the wire as written
    ['sound_play', 'sound', { volume: 1e-7 }, 'params.volume'],
    ['sound_play', 'sound', { volume: 50.0000001 }, 'params.volume'],
    ['sound_play', 'sound', { count: 1.0000001 }, 'params.count'],
    ['chase', 'light1', { width: 2.0000001 }, 'params.width'],
    ['sound_play', 'sound', { file: 'a b' }, 'params.file'],
    ['contact_pulse', 'contact', { pulse_s: 10.001 }, 'params.pulse_s'],
    ['contact_pulse', 'contact', { pulse_s: 0.049 }, 'params.pulse_s'],
    // types, unknown parameters, channel fit
    ['pulse', 'light1', { period_s: '1' }, 'params.period_s'],
    ['pulse', 'light1', { color: 'red' }, 'params.color'],
    ['pulse', 'light1', { colour: 'FF0000' }, 'params.colour'],
    ['pulse', 'light1', { duration_s: 5 }, 'params.duration_s'],
    ['pulse', 'sound', {}, 'channel'],
    ['sound_play', 'light1', {}, 'channel'],
    ['contact_on', 'light2', {}, 'channel'],
  ] as const)('%s on %s %j is refused naming %s', (name, channel, params, field) => {
    expect(refusedField(name, channel, params)).toBe(field);
  });

  describe('what an account may use', () => {
    test('with no override: the whole catalog with its own bounds', () => {
      expect(availableCommands(new Map()).map((c) => [c.def.name, c.bounds])).toEqual(CATALOG.map((c) => [c.name, {}]));
    });

    test('withdrawn commands are left out, narrowed ones carry their bounds, overrides of names not in the catalog are ignored', () => {
      const overrides = new Map<string, CommandOverride>([
        ['pulse', { withdrawn: true, bounds: {} }],
        ['chase', { withdrawn: false, bounds: { width: { min: 2, max: 4 } } }],
        ['sparkle', { withdrawn: false, bounds: {} }],
      ]);
      const available = availableCommands(overrides);
      expect(available.map((c) => c.def.name)).toEqual(CATALOG.map((c) => c.name).filter((n) => n !== 'pulse'));
      expect(available.find((c) => c.def.name === 'chase')?.bounds).toEqual({ width: { min: 2, max: 4 } });
      expect(available.find((c) => c.def.name === 'solid')?.bounds).toEqual({});
    });
  });

  describe('narrowed bounds', () => {
    const bounds: Bounds = { period_s: { min: 0.5, max: 2, default: 1.5 }, duration_s: { min: 1, max: 30 } };

    test('values inside the account bounds pass, both edges included', () => {
      expect(wire('pulse', 'light1', { period_s: 0.5 }, bounds)).toBe('pulse:0000FF,500');
      expect(wire('pulse', 'light1', { period_s: 2 }, bounds)).toBe('pulse:0000FF,2000');
      expect(wire('pulse', 'light2', { duration_s: 30 }, bounds)).toBe('pulse:0000FF,1500@30000/60000');
    });

    test('values outside them are refused with the account bounds in the message, never clamped', () => {
      expect(refusedField('pulse', 'light1', { period_s: 0.499 }, bounds)).toBe('params.period_s');
      expect(refusedField('pulse', 'light1', { period_s: 2.001 }, bounds)).toBe('params.period_s');
      expect(() => buildCommand(cmd('pulse'), 'light1', { period_s: 3 }, bounds)).toThrow('params.period_s must be from 0.5 to 2 s, got 3');
      expect(refusedField('pulse', 'light2', { duration_s: 31 }, bounds)).toBe('params.duration_s');
    });

    test('the effective default is the narrowed one, else the catalog default when inside, else the minimum', () => {
      expect(wire('pulse', 'light1', {}, bounds)).toBe('pulse:0000FF,1500');
      // catalog duration default 5 s lies inside 1..30
      expect(wire('pulse', 'light2', {}, bounds)).toBe('pulse:0000FF,1500@5000/60000');
      expect(wire('pulse', 'light2', {}, { duration_s: { min: 10, max: 20 } })).toBe('pulse:0000FF,1000@10000/60000');
    });

    test('describeCommand shows the effective bounds and only the allowed channels', () => {
      const view = describeCommand(cmd('pulse'), ['light1', 'light2', 'sound'], bounds) as { channels: string[]; parameters: Array<Record<string, unknown>> };
      expect(view.channels).toEqual(['light1', 'light2']);
      expect(view.parameters.find((p) => p.name === 'period_s')).toMatchObject({ min: 0.5, max: 2, default: 1.5, unit: 's' });
      expect(view.parameters.find((p) => p.name === 'color')).toMatchObject({ type: 'color', default: '0000FF' });
      expect(view.parameters.find((p) => p.name === 'interval_s')).toMatchObject({ min: 0, max: 86400, default: 60, zero_or_at_least: 10, channels: ['light2', 'light3'] });
    });

    test('staff narrowing must stay inside the catalog', () => {
      expect(checkNarrowing(cmd('pulse'), 'period_s', { min: 0.5, max: 2 })).toBeNull();
      expect(checkNarrowing(cmd('pulse'), 'period_s', { min: 0.05, max: 2 })).toMatch(/min must be from 0.1/);
      expect(checkNarrowing(cmd('pulse'), 'period_s', { min: 1, max: 10 })).toMatch(/max must be from/);
      expect(checkNarrowing(cmd('pulse'), 'period_s', { min: 2, max: 1 })).toMatch(/min must not exceed max/);
      expect(checkNarrowing(cmd('pulse'), 'period_s', { min: 1, max: 2, default: 3 })).toMatch(/default must lie within/);
      expect(checkNarrowing(cmd('pulse'), 'color', { min: 1, max: 2 })).toMatch(/only numeric parameters/);
      expect(checkNarrowing(cmd('pulse'), 'width', { min: 1, max: 2 })).toMatch(/has no parameter 'width'/);
      expect(checkNarrowing(cmd('pulse'), 'interval_s', { min: 5, max: 60 })).toMatch(/0 or at least 10/);
    });

    test('the admin --bound syntax', () => {
      expect(parseBound('pulse', 'period_s=0.5:2')).toEqual(['period_s', { min: 0.5, max: 2 }]);
      expect(parseBound('pulse', 'period_s=0.5:2:1')).toEqual(['period_s', { min: 0.5, max: 2, default: 1 }]);
      for (const bad of ['period_s', 'period_s=0.5', 'period_s=a:2', 'period_s=0.5:2:1:1', 'period_s=0.01:2']) {
        expect(() => parseBound('pulse', bad)).toThrow(AdminError);
      }
    });
  });
});

describe('raw commands', () => {
  test('grammar always, caps unless relaxed', () => {
    expect(() => checkRawCommand('light1', 'pulse:FF0000,100', false)).not.toThrow();
    expect(() => checkRawCommand('light1', 'pulse:FF0000,99', false)).toThrow(/availability cap/);
    expect(() => checkRawCommand('light1', 'pulse:FF0000,99', true)).not.toThrow();
    expect(() => checkRawCommand('light1', 'pulse:FF0000,19', true)).toThrow(/period_ms/);
    expect(() => checkRawCommand('light2', 'solid:FF0000@600001/0', false)).toThrow(/duration_ms/);
    expect(() => checkRawCommand('light2', 'solid:FF0000@600001/0', true)).not.toThrow();
    expect(() => checkRawCommand('contact', 'pulse:10001', false)).toThrow(/pulse_ms/);
    expect(() => checkRawCommand('contact', 'pulse:60001', true)).toThrow(/pulse_ms/);
    expect(() => checkRawCommand('light4', 'off', true)).toThrow(CommandInputError);
  });
});

describe('state reports from DEVICE_IN', () => {
  const headers = (at: string) => ({ get: (name: string) => (name === 'Received-At' ? at : '') });
  test('subject tokens and Received-At', () => {
    expect(stateReportOf('dev.in.light.0123456789AB.state.light2', headers('2026-11-22T10:00:00.000Z'), Buffer.from('solid:FF0000'))).toEqual({
      deviceId: '0123456789AB',
      channel: 'light2',
      payload: 'solid:FF0000',
      updatedAt: new Date('2026-11-22T10:00:00.000Z'),
    });
    expect(stateReportOf('dev.in.light.0123456789AB.state.sound', headers('2026-11-22T10:00:00Z'), Buffer.alloc(0))?.payload).toBe('');
  });
  test('anything else is skipped', () => {
    const ok = headers('2026-11-22T10:00:00Z');
    expect(stateReportOf('dev.in.light.0123456789AB.state.light9', ok, Buffer.from('x'))).toBeNull();
    expect(stateReportOf('dev.in.light.0123456789ab.state.light1', ok, Buffer.from('x'))).toBeNull();
    expect(stateReportOf('dev.in.light.0123456789AB.tele.light1', ok, Buffer.from('x'))).toBeNull();
    expect(stateReportOf('dev.in.light.0123456789AB.state.light1', headers('yesterday'), Buffer.from('x'))).toBeNull();
    expect(stateReportOf('dev.in.light.0123456789AB.state.light1', undefined, Buffer.from('x'))).toBeNull();
  });
});
