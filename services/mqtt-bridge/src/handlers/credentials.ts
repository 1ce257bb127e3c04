import { validatorFor, describeErrors, type BridgeCredentialDeleteBody, type BridgeCredentialUpsertBody } from '@fleet/contracts';
import { ServiceUnavailableError, ValidationError, type RequestHandler } from '@fleet/service-kit';
import type { DeviceCredentials } from '../broker/credentials';

export function bodyOf<T>(schema: string, body: unknown): T {
  const validate = validatorFor(schema);
  if (!validate(body ?? {})) throw new ValidationError(`Invalid body: ${describeErrors(validate.errors)}`);
  return body as T;
}

const brokerUnavailable = () => new ServiceUnavailableError('The MQTT broker could not apply the credential change; retry shortly.', 'broker_unavailable');

/** bridge.credential.upsert: the device's broker client and role; {} once the broker confirmed. */
export function upsertCredentialHandler(credentials: DeviceCredentials): RequestHandler {
  return async (request, { logger }) => {
    const body = bodyOf<BridgeCredentialUpsertBody>('bridge/credential-upsert', request.body);
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
export function deleteCredentialHandler(credentials: DeviceCredentials): RequestHandler {
  return async (request, { logger }) => {
    const body = bodyOf<BridgeCredentialDeleteBody>('bridge/credential-delete', request.body);
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
