import { ServiceUnavailableError, type RequestHandler } from '@fleet/service-kit';
import type { DeviceCredentials } from '../broker/credentials';

const brokerUnavailable = () => new ServiceUnavailableError('The MQTT broker could not apply the credential change; retry shortly.', 'broker_unavailable');

// The bus checked each body against its schema (proto-schemas/bridge/) before the handler runs.

/**
 * Without dynamic security (BROKER_AUTH=hook) the broker keeps no credentials: the registry's
 * record is the credential, so there is nothing to change here.
 */
const nothingToChange = (logger: { warn: (o: object, m: string) => void }, deviceId: string) => {
  logger.warn({ device_id: deviceId }, 'credential change asked of a bridge whose broker reads credentials through the hook (BROKER_AUTH=hook); check BROKER_CREDENTIALS on device-registry');
  return { body: {} };
};

/** bridge.credential.upsert: the device's broker client and role; {} once the broker confirmed. */
export function upsertCredentialHandler(credentials: DeviceCredentials | undefined): RequestHandler<'bridge.credential.upsert'> {
  return async ({ body }, { logger }) => {
    if (!credentials) return nothingToChange(logger, body.device_id);
    try {
      await credentials.upsert(body.device_id, body.product, body.password);
    } catch (err) {
      logger.warn({ err: (err as Error).message, device_id: body.device_id }, 'credential upsert failed');
      throw brokerUnavailable();
    }
    logger.info({ device_id: body.device_id, product: body.product }, 'device credential set');
    return { body: {} };
  };
}

/** bridge.credential.delete: removes the client (disconnecting the device) and its role; a missing one is success. */
export function deleteCredentialHandler(credentials: DeviceCredentials | undefined): RequestHandler<'bridge.credential.delete'> {
  return async ({ body }, { logger }) => {
    if (!credentials) return nothingToChange(logger, body.device_id);
    try {
      await credentials.remove(body.device_id);
    } catch (err) {
      logger.warn({ err: (err as Error).message, device_id: body.device_id }, 'credential delete failed');
      throw brokerUnavailable();
    }
    logger.info({ device_id: body.device_id }, 'device credential deleted');
    return { body: {} };
  };
}
