import type { BrokerCredentials, CallFor } from '@fleet/bridge-client';
import type { Logger } from '@fleet/service-kit';
import type { Product } from '../domain/products';
import type { CredentialCache } from './credential-cache';
import type { SessionTakeover } from './session-takeover';

/** How the registry keeps the broker in step with its records, whatever the broker. */
export interface RegistryBroker extends BrokerCredentials {
  /** After a removal committed: cut the device off where the broker has nothing to delete. */
  cutOff?(deviceId: string, product: Product): Promise<void>;
}

/**
 * The broker side of provisioning and removal where the broker reads credentials through the
 * hook (BROKER_CREDENTIALS=hook): the record's hash is the credential, so provisioning sets
 * nothing at the broker (no credential can outlive a record that did not commit) and removal,
 * once the record is gone, cuts the device off with a session takeover. It takes over again
 * once every replica's cache has let the row go, in case the device came back in between.
 */
export class HookCredentials implements RegistryBroker {
  constructor(
    private readonly cache: CredentialCache,
    private readonly takeover: SessionTakeover,
    private readonly cacheMs: number,
    private readonly logger: Logger,
  ) {}

  async setCredential(): Promise<void> {}

  async removeCredential(_call: CallFor, deviceId: string): Promise<void> {
    this.cache.forget(deviceId);
  }

  async cutOff(deviceId: string, product: Product): Promise<void> {
    this.cache.forget(deviceId);
    const again = setTimeout(() => {
      this.takeover.cutOff(deviceId, product).catch((err: unknown) => this.logger.warn({ err, device_id: deviceId }, 'second session takeover failed'));
    }, this.cacheMs + 100);
    again.unref();
    await this.takeover.cutOff(deviceId, product);
  }
}
