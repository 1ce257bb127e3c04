import { ConnectivityAggregator, chunk } from '../src/domain/connectivity';
import { deviceAcls, sameAcls } from '../src/domain/dynsec';
import { captureSubject, isStatusTopic, parseDeviceTopic, sharedSubscriptions, subjectToken } from '../src/domain/topics';

const roots = { light: 'light', meter: 'site/meter' };

describe('device topics', () => {
  it('parses <root>/<device id>/<levels> for known roots only', () => {
    expect(parseDeviceTopic('light/0123456789AB/tele/heartbeat', roots)).toEqual({ product: 'light', deviceId: '0123456789AB', levels: ['tele', 'heartbeat'] });
    expect(parseDeviceTopic('site/meter/0123456789AB/iv', roots)).toEqual({ product: 'meter', deviceId: '0123456789AB', levels: ['iv'] });
    expect(parseDeviceTopic('meter/0123456789AB/iv', roots)).toBeUndefined();
    expect(parseDeviceTopic('light/0123456789ab/status', roots)).toBeUndefined();
    expect(parseDeviceTopic('light/0123456789A/status', roots)).toBeUndefined();
    expect(parseDeviceTopic('light/0123456789AB', roots)).toBeUndefined();
    expect(parseDeviceTopic('lights/0123456789AB/x', roots)).toBeUndefined();
    expect(parseDeviceTopic('', roots)).toBeUndefined();
  });

  it('maps levels to subject tokens', () => {
    expect(subjectToken('a.b*c>d e\tf')).toBe('a_b_c_d_e_f');
    expect(subjectToken('')).toBe('_');
    expect(subjectToken('\u0001x')).toBe('_x');
    const topic = parseDeviceTopic('light/0123456789AB/tdl/t.1//x y', roots);
    expect(topic && captureSubject('p1.', 'in', topic)).toBe('p1.dev.in.light.0123456789AB.tdl.t_1._.x_y');
    const out = parseDeviceTopic('site/meter/0123456789AB/sys/exe', roots);
    expect(out && captureSubject('', 'out', out)).toBe('dev.out.meter.0123456789AB.sys.exe');
  });

  it('recognises the status topic and builds shared subscriptions', () => {
    expect(isStatusTopic({ product: 'light', deviceId: 'X', levels: ['status'] })).toBe(true);
    expect(isStatusTopic({ product: 'light', deviceId: 'X', levels: ['status', 'x'] })).toBe(false);
    expect(sharedSubscriptions('g', roots)).toEqual(['$share/g/light/+/#', '$share/g/site/meter/+/#']);
  });
});

describe('connectivity aggregation', () => {
  it('keeps one seen per device at its latest time, in time order', () => {
    const agg = new ConnectivityAggregator();
    agg.record('AAAAAAAAAAAA', 'light', 3000, false);
    agg.record('BBBBBBBBBBBB', 'meter', 2000, false);
    agg.record('AAAAAAAAAAAA', 'light', 1000, false);
    agg.record('AAAAAAAAAAAA', 'light', 5000, false);
    expect(agg.size).toBe(2);
    expect(agg.drain()).toEqual([
      { device_id: 'BBBBBBBBBBBB', product: 'meter', kind: 'seen', at: new Date(2000).toISOString() },
      { device_id: 'AAAAAAAAAAAA', product: 'light', kind: 'seen', at: new Date(5000).toISOString() },
    ]);
    expect(agg.drain()).toEqual([]);
    expect(agg.size).toBe(0);
  });

  it('ends with offline when the will came after the last other message', () => {
    const agg = new ConnectivityAggregator();
    agg.record('AAAAAAAAAAAA', 'light', 1000, false);
    agg.record('AAAAAAAAAAAA', 'light', 2000, true);
    agg.record('BBBBBBBBBBBB', 'light', 1500, true);
    agg.record('BBBBBBBBBBBB', 'light', 2500, false);
    agg.record('CCCCCCCCCCCC', 'light', 3000, false);
    agg.record('CCCCCCCCCCCC', 'light', 3000, true);
    expect(agg.drain().map((e) => `${e.device_id[0]}:${e.kind}:${Date.parse(e.at)}`)).toEqual([
      'A:seen:1000',
      'B:offline:1500',
      'A:offline:2000',
      'B:seen:2500',
      'C:seen:3000',
      'C:offline:3000',
    ]);
  });

  it('chunks batches in order', () => {
    expect(chunk([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
  });
});

describe('device ACLs', () => {
  it('allow only the device subtree', () => {
    const acls = deviceAcls(roots, 'meter', '0123456789AB');
    expect(acls.map((a) => a.topic)).toEqual(Array(4).fill('site/meter/0123456789AB/#'));
    expect(acls.map((a) => a.acltype).sort()).toEqual(['publishClientReceive', 'publishClientSend', 'subscribePattern', 'unsubscribePattern']);
    expect(sameAcls(acls, [...acls].reverse())).toBe(true);
    expect(sameAcls(acls, deviceAcls(roots, 'light', '0123456789AB'))).toBe(false);
  });
});
