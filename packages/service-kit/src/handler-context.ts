import type { Logger } from './logger';

/** What a request handler knows besides the request: its logger and its time. */
export interface HandlerContext {
  logger: Logger;
  /**
   * When the caller stops waiting for the outcome (epoch milliseconds): the envelope's
   * `deadline`, or this service's own bus timeout from the request's arrival when the sender
   * set none. Work for the request must not commit after it (packages/db `transactionBy`), and
   * requests made on its behalf pass it on (`bus.request(..., { deadline })`).
   */
  deadline: number;
  /** Milliseconds left until the deadline; 0 once it has passed. */
  remainingMs(): number;
  /**
   * To be awaited right before the COMMIT of work for the request (packages/db `transactionBy`
   * does): tells a caller that asked for it (the envelope's `commit_notice`) that the work may be
   * stored from now on, so it waits for the outcome instead of answering that nothing happened.
   * Resolves once the bus server has the notice.
   */
  beforeCommit(): Promise<void>;
}
