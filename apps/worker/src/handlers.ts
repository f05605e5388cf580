/**
 * The handler API: plain async functions registered per (provider, event type).
 *
 *   registry.on('stripe', 'payment_intent.succeeded', async (event, ctx) => {
 *     await ctx.transaction('credit-ledger', async (tx) => { ... }, { completesEvent: true });
 *   });
 *
 * `provider` may be a source name (`stripe-eu`) or a kind (`stripe`, matching every Stripe
 * source); a source-name registration wins over a kind registration.
 */
import type { Logger, PoolClient } from '@oncehook/shared';

export interface HandledEvent<P = unknown> {
  rowId: number;
  provider: string;
  kind: string;
  eventId: string;
  type: string;
  payload: P;
  signedAt: Date | null;
  /** 1 on the first attempt; counts crashes too. */
  attempt: number;
  generation: number;
}

export interface TransactionOptions {
  /**
   * Mark the event `done` in this same transaction: the domain writes, the step record and
   * the final transition commit together or not at all. Use it on the handler's last step.
   */
  completesEvent?: boolean;
}

export interface HandlerContext {
  readonly log: Logger;
  /** Aborted when our lease is lost (another worker took the event over) or on shutdown. */
  readonly signal: AbortSignal;
  /**
   * A local step: runs `fn` in a transaction fenced by our lease. The step's writes and its
   * completion record commit together; a step that already committed for this generation is
   * not run again and its recorded result is returned instead. Throws LeaseLostError (and
   * commits nothing) if another worker has taken the event over.
   *
   * The result is stored as JSON, so return plain data.
   */
  transaction<T>(step: string, fn: (tx: PoolClient) => Promise<T>, options?: TransactionOptions): Promise<T>;
}

export type Handler<P = unknown> = (event: HandledEvent<P>, ctx: HandlerContext) => Promise<void>;

export class HandlerRegistry {
  readonly #handlers = new Map<string, Handler>();

  on<P>(provider: string, type: string, handler: Handler<P>): this {
    const key = `${provider}\0${type}`;
    if (this.#handlers.has(key)) throw new Error(`a handler for ${provider} ${type} is already registered`);
    this.#handlers.set(key, handler as Handler);
    return this;
  }

  find(provider: string, kind: string, type: string): Handler | undefined {
    return this.#handlers.get(`${provider}\0${type}`) ?? this.#handlers.get(`${kind}\0${type}`);
  }
}
