import type { Logger } from './logger';

/** Runs `task` every `intervalMs` (never overlapping itself) until stopped. */
export class PeriodicJob {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly task: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /** The first run after `firstDelayMs` (at once by default), then every interval. */
  start(firstDelayMs = 0): void {
    this.stopped = false;
    this.schedule(firstDelayMs);
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.task()
        .catch((err: unknown) => this.logger.warn({ err, job: this.name }, 'periodic job failed'))
        .finally(() => this.schedule(this.intervalMs));
    }, delay);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
