import { checkEntries, checkRules, DocumentError } from '../src/domain/documents';
import { deviceLevel, signalKeyOf } from '../src/domain/levels';
import { evaluateRules, metricsOf } from '../src/domain/metrics';
import { parseReading } from '../src/domain/reading';

const solid = (r: number, g: number, b: number) => ({ light: { type: 'Solid', color: { r, g, b } } });
const entries = (over: Record<string, unknown> = {}) => ({ CLEAR: solid(0, 255, 0), ADVISORY: solid(255, 191, 0), WARNING: solid(255, 0, 0), NO_DATA: { light: { type: 'Pulse', color: { r: 0, g: 0, b: 255 }, period_s: 2 } }, ...over });
const fieldOf = (work: () => unknown): string => {
  try {
    work();
  } catch (err) {
    if (err instanceof DocumentError) return err.field;
    throw err;
  }
  throw new Error('accepted');
};

describe('profile rules', () => {
  it('accepts up to 20 rules of up to 8 conditions and names the rule and field it refuses', () => {
    const rule = { all: [{ metric: 'max_temp_c', op: '>', value: 8 }], level: 'WARNING' };
    expect(checkRules(Array(20).fill(rule))).toHaveLength(20);
    expect(fieldOf(() => checkRules(Array(21).fill(rule)))).toBe('rules');
    expect(fieldOf(() => checkRules([rule, { all: Array(9).fill(rule.all[0]), level: 'CLEAR' }]))).toBe('rules[1].all');
    expect(fieldOf(() => checkRules([{ all: [{ metric: 'temp', op: '>', value: 1 }], level: 'CLEAR' }]))).toBe('rules[0].all[0].metric');
    expect(fieldOf(() => checkRules([{ all: [{ metric: 'max_temp_c', op: '=>', value: 1 }], level: 'CLEAR' }]))).toBe('rules[0].all[0].op');
    expect(fieldOf(() => checkRules([{ all: [{ metric: 'max_temp_c', op: '>', value: 'hot' }], level: 'CLEAR' }]))).toBe('rules[0].all[0].value');
    expect(fieldOf(() => checkRules([{ all: [{ metric: 'latest_breach', op: '>', value: true }], level: 'CLEAR' }]))).toBe('rules[0].all[0].op');
    // With is_null / not_null the value means nothing: dropped, whatever it is.
    expect(checkRules([{ all: [{ metric: 'latest_temp_c', op: 'is_null', value: 3 }], level: 'CLEAR' }])).toEqual([{ all: [{ metric: 'latest_temp_c', op: 'is_null' }], level: 'CLEAR' }]);
    expect(fieldOf(() => checkRules([{ all: 'none', level: 'CLEAR' }]))).toBe('rules[0].all');
    expect(fieldOf(() => checkRules([{ all: rule.all, level: 'RED' }]))).toBe('rules[0].level');
  });

  it('runs the first matching rule, else the default; a null metric matches only is_null', () => {
    const rules = checkRules([
      { all: [{ metric: 'newest_age_secs', op: 'is_null' }], level: 'INSUFFICENT_DATA' },
      { all: [{ metric: 'max_temp_c', op: '>', value: 8 }, { metric: 'consecutive_breaches', op: '>=', value: 2 }], level: 'WARNING' },
      { all: [{ metric: 'latest_breach', op: '==', value: true }], level: 'ADVISORY' },
    ]);
    const now = new Date('2026-11-25T12:00:00Z');
    const newest = { at: new Date('2026-11-25T11:59:00Z'), breach: true, tempC: 9, humidity: 40 };
    const summary = { count: 3, breaches: 2, consecutiveBreaches: 2, minTempC: 4, maxTempC: 9, newest };
    expect(metricsOf(summary, now)).toEqual({
      reading_count: 3,
      newest_age_secs: 60,
      latest_breach: true,
      consecutive_breaches: 2,
      breaches_in_window: 2,
      latest_temp_c: 9,
      latest_humidity: 40,
      min_temp_c: 4,
      max_temp_c: 9,
    });
    expect(evaluateRules(rules, 'CLEAR', metricsOf(summary, now))).toBe('WARNING');
    expect(evaluateRules(rules, 'CLEAR', metricsOf({ ...summary, consecutiveBreaches: 1 }, now))).toBe('ADVISORY');
    expect(evaluateRules(rules, 'CLEAR', metricsOf({ ...summary, newest: { ...newest, breach: false }, consecutiveBreaches: 0 }, now))).toBe('CLEAR');
    expect(evaluateRules(rules, 'CLEAR', metricsOf({ count: 0, breaches: 0, consecutiveBreaches: 0, minTempC: null, maxTempC: null, newest: null }, now))).toBe('INSUFFICENT_DATA');
    // A rule without conditions always holds: what follows it is never reached.
    const catchAll = checkRules([{ all: [{ metric: 'max_temp_c', op: '>', value: 8 }], level: 'WARNING' }, { all: [], level: 'ADVISORY' }, { all: [], level: 'CLEAR' }]);
    expect(evaluateRules(catchAll, 'CLEAR', metricsOf(summary, now))).toBe('WARNING');
    expect(evaluateRules(catchAll, 'CLEAR', metricsOf({ ...summary, maxTempC: 5 }, now))).toBe('ADVISORY');
  });
});

describe('signal entries', () => {
  it('encodes each entry as the light1 payload the light runs', () => {
    expect(checkEntries(entries()).payloads).toEqual({ CLEAR: 'solid:00FF00', ADVISORY: 'solid:FFBF00', WARNING: 'solid:FF0000', NO_DATA: 'pulse:0000FF,2000' });
  });

  it('refuses a missing or unknown entry, a missing field, a value out of range or not exact, naming entry and field', () => {
    const { NO_DATA: _, ...three } = entries();
    expect(fieldOf(() => checkEntries(three))).toBe('entries.NO_DATA');
    expect(fieldOf(() => checkEntries({ ...entries(), ALARM: solid(1, 1, 1) }))).toBe('entries.ALARM');
    expect(fieldOf(() => checkEntries(entries({ WARNING: { light: { type: 'Pulse', color: { r: 1, g: 2, b: 3 } } } })))).toBe('entries.WARNING.light.period_s');
    expect(fieldOf(() => checkEntries(entries({ WARNING: { light: { type: 'Pulse', color: { r: 1, g: 2, b: 3 }, period_s: 0.05 } } })))).toBe('entries.WARNING.light.period_s');
    expect(fieldOf(() => checkEntries(entries({ WARNING: { light: { type: 'Pulse', color: { r: 1, g: 2, b: 3 }, period_s: 0.1005 } } })))).toBe('entries.WARNING.light.period_s');
    expect(fieldOf(() => checkEntries(entries({ CLEAR: { light: { type: 'Solid', color: { r: 256, g: 0, b: 0 } } } })))).toBe('entries.CLEAR.light.color.r');
    const pulseThenSolid = { type: 'PulseThenSolid', pulse_time_s: 5, pulse_color: { r: 0, g: 0, b: 255 }, pulse_period_s: 1, solid_color: { r: 0, g: 255, b: 0 }, repeat_s: 5 };
    expect(fieldOf(() => checkEntries(entries({ ADVISORY: { light: pulseThenSolid } })))).toBe('entries.ADVISORY.light.repeat_s');
    expect(checkEntries(entries({ ADVISORY: { light: { ...pulseThenSolid, repeat_s: 6 } } })).payloads.ADVISORY).toBe('pulsesolid:5000,0000FF,1000,00FF00,6');
  });
});

describe('levels', () => {
  it('shows the no-data entry for every no-data level and lets the most severe sensor win', () => {
    expect(['NO_SENSORS', 'INSUFFICENT_DATA', 'STALE_DATA', 'UNKNOWN'].map((l) => signalKeyOf(l as never))).toEqual(['NO_DATA', 'NO_DATA', 'NO_DATA', 'NO_DATA']);
    expect(deviceLevel([])).toBe('NO_SENSORS');
    expect(deviceLevel(['CLEAR', 'STALE_DATA'])).toBe('STALE_DATA');
    expect(deviceLevel(['STALE_DATA', 'ADVISORY', 'CLEAR'])).toBe('ADVISORY');
    expect(deviceLevel(['ADVISORY', 'WARNING'])).toBe('WARNING');
  });
});

describe('readings', () => {
  const now = new Date('2026-11-25T12:00:00Z');
  const at = now.getTime() / 1000 - 30;
  const parse = (topic: string, doc: unknown) => parseReading('0123456789AB', topic, Buffer.from(typeof doc === 'string' ? doc : JSON.stringify(doc)), now);

  it('reads the sensor id from the topic (dots included) and the reading from the payload', () => {
    expect(parse('light/0123456789AB/tdl/fridge.1:a', { temp_c: 4.5, humidity: null, breach: false, at })).toEqual({
      ok: true,
      reading: { deviceId: '0123456789AB', tdlId: 'fridge.1:a', at: new Date(at * 1000), tempC: 4.5, humidity: null, breach: false, receivedAt: now },
    });
  });

  it('reads the sensor id under a topic root of more than one level', () => {
    const reading = { temp_c: 4.5, humidity: 40, breach: false, at };
    expect(parse('acme/site-2/light/0123456789AB/tdl/fridge.1', reading)).toMatchObject({ ok: true, reading: { tdlId: 'fridge.1', tempC: 4.5 } });
    expect(parse('acme/light/0123456789AB/tdl/fridge.1/extra', reading).ok).toBe(false);
    expect(parse('acme/light/FFFFFFFFFFFF/tdl/fridge.1', reading).ok).toBe(false);
  });

  it('takes a reading dated after its arrival as of its arrival, so it does not stay the newest', () => {
    const ahead = parse('light/0123456789AB/tdl/fridge.1', { temp_c: 9, humidity: null, breach: true, at: now.getTime() / 1000 + 12 * 3600 });
    expect(ahead).toMatchObject({ ok: true, reading: { at: now, receivedAt: now } });
  });

  it('refuses what the protocol does not allow, with a reason', () => {
    expect(parse('light/0123456789AB/tdl/bad id', { temp_c: 1, humidity: 1, breach: false, at }).ok).toBe(false);
    expect(parse('light/0123456789AB/tdl/a', 'not json').ok).toBe(false);
    expect(parse('light/0123456789AB/tdl/a', { temp_c: '4', humidity: 1, breach: false, at }).ok).toBe(false);
    expect(parse('light/0123456789AB/tdl/a', { temp_c: 4, humidity: 1, breach: 'no', at }).ok).toBe(false);
    expect(parse('light/0123456789AB/tdl/a', { temp_c: 4, humidity: 1, breach: false, at: at + 3 * 86_400 }).ok).toBe(false);
  });
});
