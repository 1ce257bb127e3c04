/**
 * The one client of light-command's calls made by other services (subjects in
 * proto-schemas/subjects.json owned by light-command that no partner route names), owned beside
 * light-command so every caller has the same policies:
 *
 * - **Errors**: a payload light-command refuses (400: the device would not run it) reaches the
 *   caller as that error, since the caller built it; light-command out of reach, slow, or the
 *   broker not taking the message is a 503 `publish_failed` (the light got nothing).
 * - **Time**: a call gets no more than the work it serves has left (`deadline`).
 * - **Contract**: the bus checks bodies and replies against proto-schemas/light/.
 */
import type { LightAutomationWriteReply, SubjectsOf } from '@fleet/contracts';
import { fromEnvelopeError, ServiceUnavailableError, type BodyOf, type Bus, type CallFor, type ReplyBodyOf, type RequestOf, type ServiceClientOptions } from '@fleet/service-kit';

type LightSubject = SubjectsOf<'light-command'>;

export type { CallFor } from '@fleet/service-kit';

/** What reached the broker on the light's light1 topic, and when. */
export type AutomationWrite = LightAutomationWriteReply;

export type LightClientOptions = ServiceClientOptions;

/** Showing an alert signal's entry on a light (config-alerting's automation). */
export interface AutomationWriter {
  writeAutomation(call: CallFor, deviceId: string, payload: string): Promise<AutomationWrite>;
}

const publishFailed = (): ServiceUnavailableError =>
  new ServiceUnavailableError('The automation payload could not be delivered to the device broker.', 'publish_failed');

export class LightClient implements AutomationWriter {
  constructor(
    private readonly bus: Bus,
    private readonly options: LightClientOptions,
  ) {}

  /** Publishes `payload` on the light's light1 (never another channel); resolves once the broker took it. */
  async writeAutomation(call: CallFor, deviceId: string, payload: string): Promise<AutomationWrite> {
    const reply = await this.call('light.automation.write', call, { device_id: deviceId, payload });
    // The bus checked the reply against its schema; an answer without one is light-command's bug.
    if (reply === undefined) throw new Error('light-command answered light.automation.write without its body');
    return reply;
  }

  private async call<S extends LightSubject>(subject: S, call: CallFor, body: BodyOf<S>): Promise<ReplyBodyOf<S> | undefined> {
    const envelope = { request_id: call.requestId, params: {}, query: {}, body } as RequestOf<S>;
    let reply;
    try {
      reply = await this.bus.request(subject, envelope, { timeoutMs: this.options.timeoutMs, deadline: call.deadline });
    } catch (err) {
      if (err instanceof ServiceUnavailableError) throw publishFailed();
      throw err;
    }
    if (!reply.ok) {
      if (reply.error.status >= 500) {
        this.options.logger.warn({ subject, request_id: call.requestId, status: reply.error.status, code: reply.error.code }, 'light-command failed');
        throw publishFailed();
      }
      throw fromEnvelopeError(reply.error);
    }
    return reply.body;
  }
}
