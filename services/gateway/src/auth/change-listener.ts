import { Client } from 'pg';
import { warnIfFails, type Logger } from '@fleet/service-kit';
import { AUTH_CHANGES_CHANNEL } from '../store/partners';

/**
 * Listens for partner and key changes (Postgres NOTIFY from the same transaction as the
 * write). While the listener is not connected nothing may be cached, since a revocation
 * could be missed; `live` says whether caching is safe right now.
 */
export class AuthChangeListener {
  private client?: Client;
  private stopped = false;
  /** The one pending reconnection: a lost connection reports both `error` and `end`. */
  private reconnect?: NodeJS.Timeout;
  live = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly onChange: () => void,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    this.reconnect = undefined;
    if (this.stopped) return;
    const client = new Client({ connectionString: this.databaseUrl });
    client.on('notification', () => this.onChange());
    client.on('error', (err) => this.lost(err));
    client.on('end', () => this.lost());
    try {
      await client.connect();
      await client.query(`LISTEN ${AUTH_CHANGES_CHANNEL}`);
      if (this.stopped) {
        await client.end();
        return;
      }
      this.client = client;
      // Anything cached before this point may predate a change we never heard of.
      this.onChange();
      this.live = true;
    } catch (err) {
      this.lost(err);
    }
  }

  private lost(err?: unknown): void {
    if (!this.live && this.client === undefined && this.stopped) return;
    this.live = false;
    this.client = undefined;
    this.onChange();
    if (this.stopped || this.reconnect !== undefined) return;
    this.logger.warn({ err }, 'auth change listener lost; caching off until it reconnects');
    this.reconnect = setTimeout(() => void this.connect(), 1000);
    this.reconnect.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.live = false;
    clearTimeout(this.reconnect);
    await this.client?.end().catch(warnIfFails(this.logger, 'closing the auth change listener'));
  }
}
