import { isProduct, type Product } from '../domain/products';
import { secretDigest, verifyBrokerPassword } from '../domain/broker-password';
import type { RegistryDb } from '../store/prisma';

/** What the hook needs of a device: its product (its topic root) and its broker password hash. */
export interface BrokerCredential {
  product: Product;
  passwordHash: string | null;
}

/** Verified (hash, password) pairs kept at most; past it the memo starts over. */
const VERIFIED_MAX = 200_000;
/** Cached rows past which expired ones are swept. */
const ROWS_SWEEP_AT = 100_000;

/**
 * The hook's view of the credentials in Postgres. A device's row is read at most once per
 * `ttlMs` (at most 1 s, so a removed or re-enrolled device is refused within a second on every
 * replica), and concurrent CONNECTs of one device share the read. A scrypt verification is done
 * once per stored hash and password: the memo is keyed by the hash itself, so a new hash (a
 * re-enrolment) never matches an old password's entry, and a removed device fails at the row.
 */
export class CredentialCache {
  private readonly rows = new Map<string, { at: number; row: Promise<BrokerCredential | null> }>();
  private readonly verified = new Set<string>();

  constructor(
    private readonly db: Pick<RegistryDb, 'device'>,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  lookup(deviceId: string): Promise<BrokerCredential | null> {
    const t = this.now();
    const cached = this.rows.get(deviceId);
    if (cached && t - cached.at < this.ttlMs) return cached.row;
    const row = this.read(deviceId);
    this.rows.set(deviceId, { at: t, row });
    // A failed read is not remembered: the next CONNECT asks the database again.
    row.catch(() => this.rows.get(deviceId)?.row === row && this.rows.delete(deviceId));
    if (this.rows.size > ROWS_SWEEP_AT) this.sweep(t);
    return row;
  }

  /** Drops what is known of a device at once (this replica removed it). */
  forget(deviceId: string): void {
    this.rows.delete(deviceId);
  }

  async passwordMatches(credential: BrokerCredential, password: string): Promise<boolean> {
    if (credential.passwordHash === null) return false;
    const key = `${credential.passwordHash}\u0000${secretDigest(password).toString('base64')}`;
    if (this.verified.has(key)) return true;
    const ok = await verifyBrokerPassword(password, credential.passwordHash);
    if (ok) {
      if (this.verified.size >= VERIFIED_MAX) this.verified.clear();
      this.verified.add(key);
    }
    return ok;
  }

  private async read(deviceId: string): Promise<BrokerCredential | null> {
    const row = await this.db.device.findUnique({ where: { deviceId }, select: { product: true, brokerPasswordHash: true } });
    if (!row || !isProduct(row.product)) return null;
    return { product: row.product, passwordHash: row.brokerPasswordHash };
  }

  private sweep(t: number): void {
    for (const [id, entry] of this.rows) if (t - entry.at >= this.ttlMs) this.rows.delete(id);
  }
}
