import { MsgHdrsImpl } from 'nats';
import { ConnectivityAggregator, chunk } from '../src/domain/connectivity';
import { deviceAcls, sameAcls } from '../src/domain/dynsec';
import { captureHeaderBlock, headerTopic, isPubAck, IsoClock, pubackPackets } from '../src/domain/wire';
import { readBridgeConfig } from '../src/config';
import { clientTrace } from '../src/broker/lifecycle';
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

describe('capture wire formats', () => {
  it('encodes the header block as nats.js does for the same headers', () => {
    const fields = { topic: 'light/0123456789AB/tele/x', receivedAt: '2026-01-02T03:04:05.006Z', retain: true, qos: 1, msgId: 'bridge-a-1f.2-3', stream: 'DEVICE_IN' };
    const h = new MsgHdrsImpl();
    h.set('Mqtt-Topic', fields.topic);
    h.set('Received-At', fields.receivedAt);
    h.set('Mqtt-Retain', '1');
    h.set('Mqtt-Qos', '1');
    h.set('Nats-Msg-Id', fields.msgId);
    h.set('Nats-Expected-Stream', fields.stream);
    expect(Buffer.from(captureHeaderBlock(fields)).toString('utf8')).toBe(Buffer.from(h.encode()).toString('utf8'));
    const decoded = MsgHdrsImpl.decode(captureHeaderBlock({ ...fields, topic: 'light/0123456789AB/a\r\nb%', retain: false, qos: 0 }));
    expect(decoded.get('Mqtt-Topic')).toBe('light/0123456789AB/a%0D%0Ab%25');
    expect(decoded.get('Mqtt-Retain')).toBe('0');
    expect(decoded.get('Mqtt-Qos')).toBe('0');
    expect(headerTopic('light/x/é')).toBe('light/x/é');
  });

  it('formats a receive time once per millisecond', () => {
    const clock = new IsoClock();
    expect(clock.iso(0)).toBe('1970-01-01T00:00:00.000Z');
    const a = clock.iso(1_700_000_000_123);
    expect(a).toBe(new Date(1_700_000_000_123).toISOString());
    expect(clock.iso(1_700_000_000_123)).toBe(a);
    expect(clock.iso(1_700_000_000_124)).toBe(new Date(1_700_000_000_124).toISOString());
  });

  it('writes PUBACKs in the 4-byte form, in order', () => {
    expect([...pubackPackets([1, 0x1234, 65535])]).toEqual([0x40, 2, 0, 1, 0x40, 2, 0x12, 0x34, 0x40, 2, 0xff, 0xff]);
    expect(pubackPackets([]).length).toBe(0);
  });

  it('tells a PubAck from an error or a status answer', () => {
    const bytes = (s: string) => new Uint8Array(Buffer.from(s));
    expect(isPubAck(bytes('{"stream":"DEVICE_IN","seq":7}'))).toBe(true);
    expect(isPubAck(bytes('{"stream":"DEVICE_IN","seq":7,"duplicate":true}'))).toBe(true);
    expect(isPubAck(bytes('{"seq":7,"stream":"S"}'))).toBe(true);
    expect(isPubAck(bytes('{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}'))).toBe(false);
    expect(isPubAck(bytes('{"stream":'))).toBe(false);
    expect(isPubAck(new Uint8Array(0))).toBe(false);
    expect(isPubAck(bytes('nonsense'))).toBe(false);
  });
});

describe("mqtt.js's packet trace", () => {
  const env = { NATS_URL: 'nats://127.0.0.1:4222', MQTT_ADMIN_USERNAME: 'admin', MQTT_ADMIN_PASSWORD: 'secret' };

  it('is left out unless DEBUG is set, so its per-packet calls cost nothing', () => {
    expect(readBridgeConfig(env).MQTT_CLIENT_TRACE).toBe(false);
    expect(readBridgeConfig({ ...env, DEBUG: 'mqttjs*' }).MQTT_CLIENT_TRACE).toBe(true);
    const quiet = clientTrace(false).log;
    expect(typeof quiet).toBe('function');
    expect(quiet?.('handlePublish: packet %o', {})).toBeUndefined();
    expect(clientTrace(true)).toEqual({});
  });
});
