import mqtt from 'mqtt';
import { MAX_MQTT_STRING_BYTES, mqttStringProblem } from '../src';

describe('mqttStringProblem', () => {
  it.each([
    ['a/b/c', 'plain levels'],
    ['a//b', 'empty levels'],
    ['capteur/été/温度', 'letters outside ASCII'],
    ['x/\u{1F600}', 'a paired surrogate (astral code point)'],
    ['x/\u00a0\ufffd', 'no-break space and the replacement character'],
  ])('accepts %j (%s)', (topic) => {
    expect(mqttStringProblem(topic)).toBeUndefined();
  });

  it.each([
    ['a\u0000b', 'U+0000'],
    ['a\nb', 'U+000A'],
    ['a\u007fb', 'U+007F'],
    ['0\u0085', 'U+0085'],
    ['a\ufdd0', 'U+FDD0'],
    ['a\uffff', 'U+FFFF'],
    ['a\u{1FFFE}', 'U+1FFFE'],
    ['a\ud800b', 'unpaired surrogate'],
    ['a\udc00', 'unpaired surrogate'],
  ])('refuses %j, naming %s', (topic, named) => {
    expect(mqttStringProblem(topic)).toContain(named);
  });

  it('refuses a topic longer than 65,535 bytes as UTF-8, counting bytes rather than characters', () => {
    expect(mqttStringProblem('é'.repeat(MAX_MQTT_STRING_BYTES / 2))).toBeUndefined();
    expect(mqttStringProblem('é'.repeat(MAX_MQTT_STRING_BYTES / 2 + 1))).toContain('bytes');
  });
});

/**
 * The rules above are the broker's: Mosquitto drops a client that publishes to a topic it
 * refuses. Checked against the broker on this machine so the list cannot drift from it.
 */
describe('against the broker', () => {
  const url = process.env.MQTT_URL ?? 'mqtt://127.0.0.1:1883';

  async function brokerKeepsConnection(topic: string): Promise<boolean> {
    const client = await mqtt.connectAsync(url, { protocolVersion: 5, reconnectPeriod: 0 });
    try {
      await Promise.race([
        client.publishAsync(topic, 'x', { qos: 1 }),
        new Promise((_, reject) => client.once('close', () => reject(new Error('closed')))),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      client.end(true);
    }
  }

  it.each(['ok/topic/é', 'a\u0085b', 'a\u0001b', 'a\ufdd5'])('the broker and mqttStringProblem agree on %j', async (topic) => {
    expect(await brokerKeepsConnection(topic)).toBe(mqttStringProblem(topic) === undefined);
  });
});
