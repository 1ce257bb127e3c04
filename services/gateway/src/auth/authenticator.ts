import type { Principal } from '@fleet/contracts';
import { parseApiKey, secretMatches } from '../domain/api-key';
import type { KeyWithPartner } from '../store/partners';

export type KeyLookup = (keyPrefix: string) => Promise<KeyWithPartner | null>;

const CACHE_TTL_MS = 60_000;
const CACHE_MAX_ENTRIES = 10_000;

/**
 * Turns a bearer key into the principal it acts for, or null for a missing, malformed,
 * unknown, revoked or disabled key (all answered the same way). Lookups are cached briefly
 * while the change listener is live; any change clears the cache.
 */
export class Authenticator {
  private readonly cache = new Map<string, { entry: KeyWithPartner; expires: number }>();
  /** One principal per cached entry, so per-principal work (e.g. the account body) is done once. */
  private readonly principals = new WeakMap<KeyWithPartner, Principal>();
  /** Bumped on every change, so a lookup that raced a change is not cached. */
  private generation = 0;

  constructor(
    private readonly lookup: KeyLookup,
    private readonly cachingAllowed: () => boolean,
  ) {}

  forgetAll(): void {
    this.generation++;
    this.cache.clear();
  }

  async authenticate(presented: string): Promise<Principal | null> {
    const parsed = parseApiKey(presented);
    if (!parsed) return null;
    const entry = await this.find(parsed.keyPrefix);
    if (!entry || entry.revokedAt || entry.partner.disabledAt) return null;
    if (!secretMatches(parsed.secret, entry.secretHash)) return null;
    let principal = this.principals.get(entry);
    if (!principal) {
      principal = toPrincipal(entry);
      this.principals.set(entry, principal);
    }
    return principal;
  }

  private async find(keyPrefix: string): Promise<KeyWithPartner | null> {

    const now = Date.now();
    const hit = this.cache.get(keyPrefix);
    if (hit && hit.expires > now && this.cachingAllowed()) return hit.entry;
    const generation = this.generation;
    const entry = await this.lookup(keyPrefix);
    if (entry && this.cachingAllowed() && generation === this.generation) {
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
      this.cache.set(keyPrefix, { entry, expires: now + CACHE_TTL_MS });
    }
    return entry;
  }
}

/** Extracts the key from `Authorization: Bearer <key>`; undefined when no header was sent. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match ? match[1] : '';
}

function toPrincipal(entry: KeyWithPartner): Principal {
  const { partner } = entry;
  return {
    partner_id: partner.id,
    name: partner.name,
    key_prefix: entry.keyPrefix,
    permissions: partner.permissions,
    org_grants: partner.orgGrants,
    allowed_channels: partner.allowedChannels,
    limits: { requests_per_min: partner.requestsPerMin, device_commands_per_min: partner.deviceCommandsPerMin },
  };
}
