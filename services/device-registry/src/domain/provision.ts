import { ValidationError } from '@fleet/service-kit';
import { isBrokerPassword, isRootSecret } from '@fleet/device-protocol';
import { isDeviceId, isProduct, NAME_MAX, nameLength, STAGING_NODE_ID, type Product } from './products';

export type CredentialSource = 'generate' | 'root_secret' | 'mqtt_password';
export const CREDENTIAL_SOURCES: readonly CredentialSource[] = ['generate', 'root_secret', 'mqtt_password'];
export const CREDENTIAL_FORMAT = 'derived-v1';
const BODY_FIELDS = ['credential_format', 'credential_source', 'root_secret', 'mqtt_password', 'product', 'name', 'org'];

/** A provisioning request that passed every rule of the spec's provision body. */
export interface ProvisionRequest {
  deviceId: string;
  product: Product;
  source: CredentialSource;
  rootSecret?: string;
  mqttPassword?: string;
  name?: string;
  org?: string;
}

const isString = (v: unknown): v is string => typeof v === 'string';

/** Checks the provision body (spec "Provision body"); throws a 400 naming the first broken rule. */
export function parseProvisionBody(deviceId: string, body: Record<string, unknown> | undefined): ProvisionRequest {
  if (!isDeviceId(deviceId)) throw new ValidationError("invalid 'device_id': must be 12 uppercase hexadecimal characters");
  const b = body ?? {};
  for (const field of Object.keys(b)) if (!BODY_FIELDS.includes(field)) throw new ValidationError(`unknown field '${field}'`);

  if (b.credential_format === undefined) throw new ValidationError("missing required field 'credential_format'");
  if (b.credential_format !== CREDENTIAL_FORMAT) throw new ValidationError(`invalid 'credential_format': must be '${CREDENTIAL_FORMAT}'`);

  const source = b.credential_source ?? 'generate';
  if (!isString(source) || !(CREDENTIAL_SOURCES as readonly string[]).includes(source)) {
    throw new ValidationError("invalid 'credential_source': must be one of generate, root_secret, mqtt_password");
  }
  const out: ProvisionRequest = { deviceId, product: 'light', source: source as CredentialSource };

  // Only the field matching the chosen source may be sent.
  for (const field of ['root_secret', 'mqtt_password'] as const) {
    if (b[field] !== undefined && field !== source) {
      throw new ValidationError(`field '${field}' is not allowed with credential_source '${source}'`);
    }
  }
  if (source === 'root_secret') {
    if (b.root_secret === undefined) throw new ValidationError("missing required field 'root_secret' for credential_source 'root_secret'");
    if (!isRootSecret(b.root_secret)) {
      throw new ValidationError("invalid 'root_secret': must be 16 printable ASCII characters without whitespace");
    }
    out.rootSecret = b.root_secret;
  }
  if (source === 'mqtt_password') {
    if (b.mqtt_password === undefined) throw new ValidationError("missing required field 'mqtt_password' for credential_source 'mqtt_password'");
    if (!isBrokerPassword(b.mqtt_password)) {
      throw new ValidationError("invalid 'mqtt_password': must be 32 lowercase hexadecimal characters");
    }
    out.mqttPassword = b.mqtt_password;
  }

  if (b.product !== undefined) {
    if (!isProduct(b.product)) throw new ValidationError("invalid 'product': must be 'light' or 'meter'");
    out.product = b.product;
  }
  if (b.name !== undefined) {
    if (!isString(b.name) || nameLength(b.name) < 1 || nameLength(b.name) > NAME_MAX) {
      throw new ValidationError(`invalid 'name': must be a string of 1 to ${NAME_MAX} characters`);
    }
    out.name = b.name;
  }
  if (b.org !== undefined) {
    if (!isString(b.org) || b.org.length === 0) throw new ValidationError("invalid 'org': must be a non-empty organization name");
    out.org = b.org;
  }
  return out;
}

/** An organization node as placement sees it. */
export interface OrgCandidate {
  id: number;
  parentId: number | null;
  name: string;
}

/**
 * Where a provisioned device goes (spec "Org placement").
 * - access_all_devices: `org` optional; it must name an existing ROOT node; omitted means Staging / Inventory.
 * - org-scoped: `org` required; it must name exactly one node inside the granted subtrees.
 * `candidates` are the nodes named `org`: every root so named for access-all, the in-scope ones otherwise.
 */
export function placeDevice(org: string | undefined, accessAll: boolean, candidates: readonly OrgCandidate[]): number {
  if (org === undefined) {
    if (accessAll) return STAGING_NODE_ID;
    throw new ValidationError("missing required field 'org': an organization-scoped partner must name an organization in its scope");
  }
  const matches = accessAll ? candidates.filter((c) => c.parentId === null && c.name === org) : candidates.filter((c) => c.name === org);
  if (matches.length === 0) throw new ValidationError(`unknown organization '${org}'`);
  if (matches.length > 1) {
    // One wording for both: with access-all the whole fleet is the caller's scope.
    throw new ValidationError(`organization '${org}' is ambiguous: ${matches.length} organizations in your scope share that name`);
  }
  return (matches[0] as OrgCandidate).id;
}
