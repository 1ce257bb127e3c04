/**
 * Signing secrets and signatures per the Standard Webhooks specification
 * (https://www.standardwebhooks.com): a secret is `whsec_` + base64 of 24 random bytes; a
 * delivery carries `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`,
 * `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per valid secret separated by a
 * space (during a rotation both the new and the previous secret sign). The `standardwebhooks`
 * package computes the signature, so what partners verify with it is what we sign.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

const SECRET_PREFIX = 'whsec_';

export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(24).toString('base64')}`;
}

/** The `webhook-signature` header of a body signed with each secret. */
export function signatureHeader(secrets: readonly string[], id: string, at: Date, body: string): string {
  return secrets.map((secret) => new Webhook(secret).sign(id, at, body)).join(' ');
}

/** The headers of one delivery attempt. */
export function deliveryHeaders(secrets: readonly string[], id: string, at: Date, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'fleet-webhooks/1',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signatureHeader(secrets, id, at, body),
  };
}
