import { timingSafeEqual } from 'node:crypto';
import { isDeviceId } from '../domain/products';
import { deviceMayUse, type BrokerAction, type TopicRoots } from '../domain/broker-access';
import { secretDigest } from '../domain/broker-password';
import type { CredentialCache } from './credential-cache';

/** The platform's own broker identity (mqtt-bridge's, and the registry's session takeover). */
export interface PlatformIdentity {
  username: string;
  password: string;
}

export type Verdict = 'allow' | 'deny';

/**
 * The answers of the broker authentication and authorization hook, whatever broker asks
 * (http/hook-server.ts speaks EMQX's and RabbitMQ's forms of the question).
 */
export class BrokerHook {
  private readonly platformDigest: Buffer;

  constructor(
    private readonly credentials: CredentialCache,
    private readonly platform: PlatformIdentity,
    private readonly roots: TopicRoots,
  ) {
    this.platformDigest = secretDigest(platform.password);
  }

  isPlatform(username: string): boolean {
    return username === this.platform.username;
  }

  /** CONNECT. `clientId` is checked when the broker sends it: a device's must be its device id. */
  async authenticate(username: string, password: string, clientId?: string): Promise<Verdict> {
    if (this.isPlatform(username)) return timingSafeEqual(secretDigest(password), this.platformDigest) ? 'allow' : 'deny';
    if (!isDeviceId(username) || (clientId !== undefined && clientId !== username)) return 'deny';
    const credential = await this.credentials.lookup(username);
    if (!credential) return 'deny';
    return (await this.credentials.passwordMatches(credential, password)) ? 'allow' : 'deny';
  }

  /** PUBLISH to a topic, or SUBSCRIBE with a filter. */
  async authorize(username: string, topic: string, action: BrokerAction, clientId?: string): Promise<Verdict> {
    if (this.isPlatform(username)) return 'allow';
    if (!isDeviceId(username) || (clientId !== undefined && clientId !== username)) return 'deny';
    const credential = await this.credentials.lookup(username);
    if (!credential) return 'deny';
    return deviceMayUse(topic, username, credential.product, this.roots) ? 'allow' : 'deny';
  }

  /** Whether the user exists at all (RabbitMQ's vhost and resource questions carry no password). */
  async known(username: string): Promise<boolean> {
    if (this.isPlatform(username)) return true;
    return isDeviceId(username) && (await this.credentials.lookup(username)) !== null;
  }
}
