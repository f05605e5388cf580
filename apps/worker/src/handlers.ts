/**
 * The handler API: plain async functions registered per (provider, event type).
 *
 *   registry.on('stripe', 'payment_intent.succeeded', async (event, ctx) => {
 *     const receipt = await ctx.step('send-receipt', ({ idempotencyKey }) => email.send(..., idempotencyKey));
 *     await ctx.transaction('record', async (tx) => { ... }, { completesEvent: true });
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
  /**
   * An external step: calls `fn` with the step's idempotency key, outside any transaction,
   * then records its result (fenced). Once recorded it is never called again for this
   * generation; if the worker dies after the call and before the record, the next attempt
   * calls again with the SAME key, so an idempotent API applies nothing new. Effects are
   * exactly once only when the API honours the key; see docs/handlers.md.
   *
   * The result is stored as JSON, so return plain data.
   */
  step<T>(step: string, fn: (input: ExternalStepInput) => Promise<T>): Promise<T>;
}

/** What an external step's function receives. */
export interface ExternalStepInput {
  /**
   * Deterministic in (provider, event id, step name, generation): the same on every attempt
   * of this step. Send it as the downstream API's idempotency key or dedupe field.
   */
  idempotencyKey: string;
  /** Aborted when the lease is lost; pass it to fetch. */
  signal: AbortSignal;
  /** The event's attempt number (1 on the first). */
  attempt: number;
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
