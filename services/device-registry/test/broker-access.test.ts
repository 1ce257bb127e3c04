import { deviceMayUse, topicOfRoutingKey } from '../src/domain/broker-access';
import { hashBrokerPassword, verifyBrokerPassword } from '../src/domain/broker-password';

const roots = { light: 'light', meter: 'site/meter' };
const id = '0123456789AB';

describe('a device’s topics', () => {
  it('are its own subtree under its product’s root, multi-level roots included', () => {
    expect(deviceMayUse(`light/${id}/state`, id, 'light', roots)).toBe(true);
    expect(deviceMayUse(`light/${id}/#`, id, 'light', roots)).toBe(true);
    expect(deviceMayUse(`light/${id}`, id, 'light', roots)).toBe(true);
    expect(deviceMayUse(`site/meter/${id}/iv`, id, 'meter', roots)).toBe(true);
  });

  it('never span devices, another root or another id with the same start', () => {
    for (const topic of [`light/${id}X/state`, `light/+/state`, 'light/#', '#', `meter/${id}/iv`, `site/meter/${id}/iv`, `$share/g/light/${id}/#`, `/light/${id}/x`]) {
      expect(deviceMayUse(topic, id, 'light', roots)).toBe(false);
    }
  });

  it('read back from RabbitMQ routing keys, wildcards included', () => {
    expect(topicOfRoutingKey(`light.${id}.state`)).toBe(`light/${id}/state`);
    expect(topicOfRoutingKey('light.*.cmd.#')).toBe('light/+/cmd/#');
  });
});

describe('broker password hashes', () => {
  it('verify the password they were made from, salted differently each time', async () => {
    const a = await hashBrokerPassword('0123456789abcdef0123456789abcdef');
    const b = await hashBrokerPassword('0123456789abcdef0123456789abcdef');
    expect(a).not.toBe(b);
    expect(await verifyBrokerPassword('0123456789abcdef0123456789abcdef', a)).toBe(true);
    expect(await verifyBrokerPassword('0123456789abcdef0123456789abcdeF', a)).toBe(false);
  });

  it('refuse a stored value in no known form rather than throw', async () => {
    for (const stored of ['', 'plain', 'scrypt$0$8$1$AA$AA', 'scrypt$99999999$8$1$AA$AA', 'bcrypt$1$2$3$4$5']) {
      expect(await verifyBrokerPassword('x', stored)).toBe(false);
    }
  });
});
