import { DEFAULT_TOPIC_ROOTS } from '@fleet/device-protocol';
import { ValidationError } from '@fleet/service-kit';
import { captureSubjects, checkTopicName, defaultRawQos, filterReach, parseTopicFilter, topicMatches } from '../src/domain/topic-filter';

const ID = '0123456789AB';
const roots = DEFAULT_TOPIC_ROOTS;
const subjects = (filter: string, r = roots): string[] => captureSubjects(parseTopicFilter(filter), r);
const matches = (filter: string, topic: string): boolean => topicMatches(parseTopicFilter(filter), topic);

describe('topic names (raw publish)', () => {
  it('takes any topic without wildcards, empty levels included', () => {
    for (const topic of [`light/${ID}/sys/exe`, 'custom', 'a//b', '/leading', 'trailing/', 'with space/and.dot']) expect(() => checkTopicName(topic)).not.toThrow();
  });

  it.each([['light/+/sys/exe'], ['light/#'], ['a+b'], ['x#'], [''], ['$SYS/broker/uptime'], ['a\u0000b'], ['light/0\u0085x'], ['a\nb'], ['a\ud800']])('refuses %j', (topic) => {
    expect(() => checkTopicName(topic)).toThrow(ValidationError);
  });
});

describe('topic filters', () => {
  it('takes + as a whole level and # as the whole last level', () => {
    expect(parseTopicFilter('light/+/tele/#')).toEqual(['light', '+', 'tele', '#']);
    expect(parseTopicFilter('#')).toEqual(['#']);
    expect(parseTopicFilter('+')).toEqual(['+']);
    expect(parseTopicFilter('a//b')).toEqual(['a', '', 'b']);
  });

  it.each([['light/#/status'], ['light/a#'], ['light/+x/status'], ['#/x'], [''], ['a\u0000'], ['light/\u0007/#']])('refuses %j', (filter) => {
    expect(() => parseTopicFilter(filter)).toThrow(ValidationError);
  });

  it('matches as MQTT does', () => {
    expect(matches(`light/${ID}/#`, `light/${ID}/tele/heartbeat`)).toBe(true);
    expect(matches('light/+/status', `light/${ID}/status`)).toBe(true);
    expect(matches('light/+/status', `light/${ID}/tele/status`)).toBe(false);
    expect(matches('light/+', `light/${ID}/status`)).toBe(false);
    // `#` also matches its parent level.
    expect(matches(`light/${ID}/sys/#`, `light/${ID}/sys`)).toBe(true);
    expect(matches(`light/${ID}/sys/#`, `light/${ID}/system`)).toBe(false);
    expect(matches('#', 'anything/at/all')).toBe(true);
    expect(matches('a/+/c', 'a//c')).toBe(true);
    // Literal levels compare exactly: `.` is a character, not a separator.
    expect(matches(`light/${ID}/tele/a.b`, `light/${ID}/tele/a_b`)).toBe(false);
    // Wildcards at the start never match `$` topics.
    expect(matches('#', '$SYS/x')).toBe(false);
    expect(matches('+/x', '$SYS/x')).toBe(false);
    expect(matches('$SYS/#', '$SYS/x')).toBe(true);
  });
});

describe('DEVICE_IN subjects of a filter', () => {
  it('covers both directions, + as * and # as >', () => {
    expect(subjects(`light/${ID}/tele/heartbeat`)).toEqual([`dev.in.light.${ID}.tele.heartbeat`, `dev.out.light.${ID}.tele.heartbeat`]);
    expect(subjects('light/+/status')).toEqual(['dev.in.light.*.status', 'dev.out.light.*.status']);
    expect(subjects(`meter/${ID}/+/x`)).toEqual([`dev.in.meter.${ID}.*.x`, `dev.out.meter.${ID}.*.x`]);
    expect(subjects(`light/${ID}/#`)).toEqual([`dev.in.light.${ID}.>`, `dev.out.light.${ID}.>`]);
    expect(subjects('light/#')).toEqual(['dev.in.light.>', 'dev.out.light.>']);
    expect(subjects('#')).toEqual(['dev.in.>', 'dev.out.>']);
    expect(subjects(`+/${ID}/status`)).toEqual([`dev.in.*.${ID}.status`, `dev.out.*.${ID}.status`]);
  });

  it('turns levels into subject tokens as the bridge does (., *, >, spaces and empty levels)', () => {
    expect(subjects(`light/${ID}/tele/a.b`)[0]).toBe(`dev.in.light.${ID}.tele.a_b`);
    expect(subjects(`light/${ID}/x y/*/>`)[0]).toBe(`dev.in.light.${ID}.x_y._._`);
    expect(subjects(`light/${ID}//x`)[0]).toBe(`dev.in.light.${ID}._.x`);
  });

  it('reads `<levels>/#` one level higher, since # also matches its parent', () => {
    expect(subjects(`light/${ID}/sys/#`)[0]).toBe(`dev.in.light.${ID}.>`);
    expect(subjects(`light/${ID}/sys/resp/#`)[0]).toBe(`dev.in.light.${ID}.sys.>`);
    expect(subjects(`light/${ID}/+/#`)[0]).toBe(`dev.in.light.${ID}.>`);
  });

  it('maps the configured roots to their products', () => {
    const custom = { light: 'lamps.v1', meter: 'em' };
    expect(subjects(`lamps.v1/${ID}/status`, custom)[0]).toBe(`dev.in.light.${ID}.status`);
    expect(subjects(`em/${ID}/iv`, custom)[0]).toBe(`dev.in.meter.${ID}.iv`);
    expect(subjects(`light/${ID}/status`, custom)).toEqual([]);
  });

  it('reads roots of several levels, each product at its own depth', () => {
    const deep = { light: 'acme/eu/light', meter: 'meter' };
    expect(subjects(`acme/eu/light/${ID}/tele/x`, deep)).toEqual([`dev.in.light.${ID}.tele.x`, `dev.out.light.${ID}.tele.x`]);
    expect(subjects(`acme/+/light/${ID}/status`, deep)[0]).toBe(`dev.in.light.${ID}.status`);
    expect(subjects('acme/#', deep)).toEqual(['dev.in.light.>', 'dev.out.light.>']);
    // `+/<id>/status` is a meter topic here; as a light topic it is three levels short.
    expect(subjects(`+/${ID}/status`, deep)).toEqual([`dev.in.meter.${ID}.status`, `dev.out.meter.${ID}.status`]);
    // Both products at their own depths, each with its own filter.
    expect(subjects(`+/+/+/${ID}/x`, deep)).toEqual([`dev.in.light.${ID}.x`, `dev.in.meter.*.*.${ID}.x`, `dev.out.light.${ID}.x`, `dev.out.meter.*.*.${ID}.x`]);
    expect(subjects('#', deep)).toEqual(['dev.in.>', 'dev.out.>']);
    expect(subjects(`acme/eu/${ID}/status`, deep)).toEqual([]);
  });

  it('is empty when no captured topic can match', () => {
    expect(subjects('custom/topic')).toEqual([]);
    expect(subjects('light')).toEqual([]);
    expect(subjects('light/+')).toEqual([]);
    expect(subjects(`light/${ID}`)).toEqual([]);
    expect(subjects('light/not-an-id/status')).toEqual([]);
    expect(subjects('light/0123456789ab/status')).toEqual([]);
    expect(subjects('+')).toEqual([]);
  });
});

describe('reach of a filter (raw_mqtt_devices)', () => {
  const reach = (filter: string) => filterReach(parseTopicFilter(filter), roots);

  it('one device: a literal root and device id with something below', () => {
    expect(reach(`light/${ID}/#`)).toEqual({ kind: 'device', product: 'light', deviceId: ID });
    expect(reach(`meter/${ID}/+/x`)).toEqual({ kind: 'device', product: 'meter', deviceId: ID });
  });

  it('spanning: a wildcard in the root or the id level', () => {
    for (const filter of ['#', '+/x', `+/${ID}/status`, 'light/#', 'light/+/status']) expect(reach(filter)).toEqual({ kind: 'spanning' });
  });

  it('outside: another root, no device id, nothing below the id', () => {
    for (const filter of ['custom/#', 'light', `light/${ID}`, 'light/nope/status']) expect(reach(filter)).toEqual({ kind: 'outside' });
  });

  it('under a root of several levels: one device only with the whole root written out', () => {
    const deep = { light: 'acme/eu/light', meter: 'meter' };
    const deepReach = (filter: string) => filterReach(parseTopicFilter(filter), deep);
    expect(deepReach(`acme/eu/light/${ID}/#`)).toEqual({ kind: 'device', product: 'light', deviceId: ID });
    for (const filter of ['acme/#', `acme/+/light/${ID}/x`, 'acme/eu/light/+/x']) expect(deepReach(filter)).toEqual({ kind: 'spanning' });
    for (const filter of [`acme/eu/${ID}/x`, `light/${ID}/x`, 'acme/eu/light']) expect(deepReach(filter)).toEqual({ kind: 'outside' });
    // One root the prefix of the other: the filter is read under each, and only one reading names a device.
    const nested = { light: 'acme', meter: 'acme/meter' };
    expect(filterReach(parseTopicFilter(`acme/meter/${ID}/iv`), nested)).toEqual({ kind: 'device', product: 'meter', deviceId: ID });
    expect(filterReach(parseTopicFilter(`acme/${ID}/status`), nested)).toEqual({ kind: 'device', product: 'light', deviceId: ID });
  });
});

describe('default QoS of a raw publish', () => {
  it('is 2 on topics ending in sys/<level>, else 1', () => {
    expect(defaultRawQos(`light/${ID}/sys/exe`)).toBe(2);
    expect(defaultRawQos(`meter/${ID}/sys/anything`)).toBe(2);
    expect(defaultRawQos('sys/x')).toBe(2);
    expect(defaultRawQos(`light/${ID}/sys/exe/more`)).toBe(1);
    expect(defaultRawQos(`light/${ID}/system/exe`)).toBe(1);
    expect(defaultRawQos(`light/${ID}/cmd/light1`)).toBe(1);
    expect(defaultRawQos('custom')).toBe(1);
  });
});
