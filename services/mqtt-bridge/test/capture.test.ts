import type { Msg, NatsConnection, NatsError } from 'nats';
import { createLogger } from '@fleet/service-kit';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { DeviceInWriter, type CaptureOutcome, type CaptureOwner } from '../src/capture/device-in';
import { ensureStream } from '@fleet/service-kit';
import { deviceInStream } from '../src/capture/streams';
import { deleteStreams, isolation, natsClient, readStream, sleep } from './support';

/** Records the outcome; wants retries while `wanted`. */
class Owner implements CaptureOwner {
  outcomes: CaptureOutcome[] = [];
  wanted = true;
  captureDone(outcome: CaptureOutcome): void {
    this.outcomes.push(outcome);
  }
  retryWanted(): boolean {
    return this.wanted;
  }
}

describe('DeviceInWriter on JetStream', () => {
  const names = isolation();
  const logger = createLogger('mqtt-bridge-test', 'silent');
  let nc: NatsConnection;
  let writer: DeviceInWriter;

  beforeAll(async () => {
    nc = await natsClient();
    await ensureStream(await nc.jetstreamManager(), deviceInStream(names.deviceIn, names.prefix, 1), logger);
  });

  afterEach(() => writer?.stop());

  afterAll(async () => {
    await deleteStreams(nc, names.deviceIn);
    await nc.close();
  });

  const start = () => {
    writer = new DeviceInWriter({ nc, subjectPrefix: names.prefix, stream: names.deviceIn, outMsgIdPrefix: 'test-out-', logger, ackTimeoutMs: 300, sweepMs: 20 });
    writer.start();
    return writer;
  };
  const message = (deviceId: string, payload: string) => ({
    topic: `light/${deviceId}/tele/x`,
    device: { product: 'light' as const, deviceId, levels: ['tele', 'x'] },
    payload: Buffer.from(payload),
    qos: 1,
    retain: false,
    at: Date.now(),
  });

  it('stores a capture whose PubAck was lost once, by retrying with the same Nats-Msg-Id: one copy in the stream', async () => {
    const w = start();
    // The first answer goes missing (as when the PubAck is lost on the way back); the capture
    // times out and is published again.
    const internals = w as unknown as { onAnswer(err: NatsError | null, msg: Msg): void };
    const onAnswer = internals.onAnswer.bind(w);
    let swallowed = 0;
    internals.onAnswer = (err, msg) => {
      if (swallowed++ === 0) return;
      onAnswer(err, msg);
    };
    const id = randomDeviceId();
    const owner = new Owner();
    w.capture('in', message(id, 'once'), `dedupe-${id}-1`, owner);
    await waitFor(() => owner.outcomes.length > 0, { what: 'outcome' });
    expect(swallowed).toBe(2);
    expect(owner.outcomes).toEqual(['stored']);
    await sleep(100);
    const stored = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.>`);
    expect(stored.map((m) => m.string())).toEqual(['once']);
    expect(stored[0]?.headers['Nats-Msg-Id']).toBe(`dedupe-${id}-1`);
    expect(stored[0]?.headers['Mqtt-Topic']).toBe(`light/${id}/tele/x`);
  });

  it('keeps retrying while no stream takes the subject, and gives up when the owner no longer wants it', async () => {
    // A prefix no stream listens on: NATS answers "no responders" (503) to every attempt.
    writer = new DeviceInWriter({ nc, subjectPrefix: `${names.prefix}nowhere.`, stream: names.deviceIn, outMsgIdPrefix: 'test-out-', logger, ackTimeoutMs: 300, sweepMs: 20 });
    writer.start();
    const owner = new Owner();
    writer.capture('in', message(randomDeviceId(), 'lost'), 'nowhere-1', owner);
    await sleep(500);
    expect(owner.outcomes).toEqual([]);
    expect(writer.size).toBe(1);
    owner.wanted = false;
    await waitFor(() => owner.outcomes.length > 0, { timeoutMs: 5000, what: 'abandoned' });
    expect(owner.outcomes).toEqual(['abandoned']);
    expect(writer.size).toBe(0);
  });

  it('skips a message NATS can never take, and resolves write() for a stored dev.out capture', async () => {
    const w = start();
    const owner = new Owner();
    const id = randomDeviceId();
    w.capture('in', { ...message(id, ''), payload: Buffer.alloc((nc.info?.max_payload ?? 1048576) + 1) }, 'huge-1', owner);
    expect(owner.outcomes).toEqual(['skipped']);
    await w.write('out', message(id, 'sent'));
    const out = await readStream(nc, names.deviceIn, `${names.prefix}dev.out.light.${id}.>`);
    expect(out.map((m) => [m.string(), m.headers['Nats-Msg-Id']])).toEqual([['sent', 'test-out-1']]);
  });
});
