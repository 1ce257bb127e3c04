import type { JsMsg } from 'nats';
import { createLogger, isolatingPoison } from '@fleet/service-kit';

/** Just the fields isolatingPoison reads of a delivered message. */
const message = (text: string, redeliveryCount = 1): JsMsg => ({ subject: `in.${text}`, seq: 1, data: Buffer.from(text), info: { redeliveryCount } }) as unknown as JsMsg;
const logger = createLogger('test', 'silent');
const textOf = (msg: JsMsg): string => Buffer.from(msg.data).toString();

describe('isolatingPoison', () => {
  it('stores a batch in one call and returns no poison', async () => {
    const calls: string[][] = [];
    const process = isolatingPoison({ read: (m) => textOf(m), store: async (items) => void calls.push(items), logger });
    expect((await process([message('a'), message('b')])).size).toBe(0);
    expect(calls).toEqual([['a', 'b']]);
  });

  it('skips what read does not take', async () => {
    const calls: string[][] = [];
    const process = isolatingPoison({ read: (m) => (textOf(m) === 'other' ? null : textOf(m)), store: async (items) => void calls.push(items), logger });
    await process([message('a'), message('other')]);
    expect(calls).toEqual([['a']]);
  });

  it('returns the message that fails on its own and stores the others', async () => {
    const stored: string[] = [];
    const bad = message('bad');
    const process = isolatingPoison({
      read: (m) => textOf(m),
      store: async (items) => {
        if (items.includes('bad')) throw new Error('cannot store bad');
        stored.push(...items);
      },
      logger,
    });
    expect([...(await process([message('a'), bad, message('c')]))]).toEqual([bad]);
    expect(stored).toEqual(['a', 'c']);
  });

  it('throws when every message fails (the store is down), so the batch is redelivered', async () => {
    const process = isolatingPoison({ read: (m) => textOf(m), store: () => Promise.reject(new Error('store down')), logger });
    await expect(process([message('a'), message('b')])).rejects.toThrow('store down');
  });

  it('drops a lone failing message only after ten deliveries', async () => {
    const process = isolatingPoison({ read: (m) => textOf(m), store: () => Promise.reject(new Error('store down')), logger });
    await expect(process([message('a', 9)])).rejects.toThrow('store down');
    const tenth = message('a', 10);
    expect([...(await process([tenth]))]).toEqual([tenth]);
  });

  const outage = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

  it('never drops a lone message while the store is out of reach, however many deliveries', async () => {
    const process = isolatingPoison({ read: (m) => textOf(m), store: () => Promise.reject(outage()), logger });
    await expect(process([message('a', 50)])).rejects.toThrow('ECONNREFUSED');
  });

  it('redelivers the whole batch when the store goes away while its messages are retried one by one', async () => {
    let calls = 0;
    const process = isolatingPoison({
      read: (m) => textOf(m),
      store: (items) => {
        calls += 1;
        // The batch fails on a bad message, then the store goes away during the one-by-one retry.
        if (calls === 1) return Promise.reject(new Error('bad row'));
        if (calls === 2) return Promise.resolve();
        return Promise.reject(items.includes('bad') ? new Error('bad row') : outage());
      },
      logger,
    });
    await expect(process([message('a'), message('b'), message('bad'), message('c')])).rejects.toThrow('ECONNREFUSED');
  });
});
