/**
 * What a handler receives: the event, and a context whose steps make its effects exactly once.
 */
import type { Json } from './json.js';
import type { PoolClient } from 'pg';
import type { Logger } from 'pino';

export type { Json, Logger, PoolClient };

/** The verified event, as the edge recorded it, and where this run stands. */
export interface HandlerEvent<Payload = unknown> {
  /** The source it came from (the route name, e.g. `stripe` or `stripe-eu`). */
  readonly source: string;
  /** The source's provider family (`stripe`, `github`, ...). */
  readonly kind: string;
  /** The provider's stable event id: the same on every delivery of this event. */
  readonly eventId: string;
  readonly type: string;
  /** The verified body, parsed (and checked against the handler's `payload` schema, if any). */
  readonly payload: Payload;
  /** What the edge recorded besides the body: Shopify's shop domain, GitHub's hook id, ... */
  readonly meta: Readonly<Record<string, string>>;
  /** When Oncehook first received it. */
  readonly receivedAt: Date;
  /** The creation time the provider signed, when its scheme signs one. */
  readonly signedAt: Date | null;
  /** This run's attempt (1 on the first; crashes count). */
  readonly attempt: number;
  /** 0, or the replay this run belongs to. */
  readonly generation: number;
  /** This handler's name. */
  readonly handler: string;
}

/** What an external step's function receives. */
export interface StepInput {
  /**
   * Deterministic in (source, event id, handler, step name, generation), or in (source, the
   * step's `key`, handler, step name, generation) when the step has one: the same on every
   * attempt of this step. Send it, unchanged, as the downstream API's idempotency key.
   */
  readonly idempotencyKey: string;
  /** Aborted when the lease is lost or the worker shuts down; pass it to fetch. */
  readonly signal: AbortSignal;
  /** The run's attempt number (1 on the first). */
  readonly attempt: number;
}

export interface StepOptions {
  /**
   * The domain object this effect is about (`shopify-order:820982911946154508`). The step's
   * idempotency key is then derived from (source, this key, handler, step name, generation)
   * instead of the event id: every event about the object sends the SAME key. Two deliveries
   * that are different events to Oncehook but one fact to you (a body replayed under a new
   * webhook id, `orders/create` and `orders/paid` both charging one order) then charge once.
   * A replay still starts a new generation, so a deliberate replay gets a new key.
   * 1-500 characters without control characters.
   */
  key?: string;
  /**
   * This is the handler's last step: after the call, its record, the run's `done` and the
   * event's commit in one statement (one transaction less per event), as `final` does for
   * `ctx.transaction`. Use it on the last step only: the run is done when it returns.
   */
  final?: boolean;
}

export interface TransactionOptions {
  /**
   * This is the handler's last step: mark its run `done` in this same transaction, so the
   * domain writes, the step record and the final transition commit together or not at all.
   */
  final?: boolean;
}

/**
 * Types that JSON would change or refuse; a step result containing one is a compile error
 * (and, for code the types cannot see, refused when recorded).
 */
type NotJson = bigint | symbol | Date | RegExp | Map<unknown, unknown> | Set<unknown> | WeakMap<object, unknown> | Promise<unknown> | ArrayBufferView | ArrayBuffer | Error;

/**
 * `T` itself when it is plain JSON (strings, finite numbers, booleans, null, arrays, plain
 * objects, optional properties); `never` where it is not. A step function must return
 * `T & NoInfer<JsonChecked<T>>`: a Date, a Map, a bigint or a class instance in a result does
 * not compile (it would come back different on a resumed attempt). Literal values in a result
 * keep their literal types (`{ status: 'pending' }`), which is what was recorded.
 */
export type JsonChecked<T> = T extends NotJson
  ? never
  : T extends (...args: never[]) => unknown
    ? never
    : // biome-ignore lint/suspicious/noConfusingVoidType: a step with no result returns void (recorded as null)
      T extends string | number | boolean | null | undefined | void
      ? T
      : T extends readonly unknown[]
        ? { [I in keyof T]: JsonChecked<T[I]> }
        : T extends object
          ? { [K in keyof T]: JsonChecked<T[K]> }
          : never;

export interface HandlerContext {
  /** pino logger bound to the source, event id, handler, run and attempt. */
  readonly log: Logger;
  /** Aborted when our lease is lost (another worker took the run over) or on shutdown. */
  readonly signal: AbortSignal;
  /**
   * A local step: runs `fn` in a transaction that first locks this run and checks our lease
   * (the fence). `fn`'s writes and the step's record commit together; a step that already
   * committed for this generation is not run again and its recorded result is returned.
   * Throws LeaseLostError (and commits nothing) if another worker took the run over.
   *
   * `name` is unique within one run (a loop puts its variable in it: `credit:${line.id}`).
   * The result is recorded as JSON and returned exactly as recorded, on this attempt and on
   * any resumed one, so return plain data.
   */
  transaction<T>(name: string, fn: (tx: PoolClient) => Promise<T & NoInfer<JsonChecked<T>>>, options?: TransactionOptions): Promise<T>;
  /**
   * An external step: calls `fn` with the step's idempotency key, outside any transaction
   * (no lock is held across the network), then records its result (fenced). Once recorded
   * it is never called again for this generation; if the worker dies after the call and
   * before the record, the next attempt calls again with the SAME key, so an API that honours
   * the key applies nothing new (docs/handlers.md: what is exactly once and what is not).
   *
   * Same naming and result rules as `transaction`. Pass `{ key }` to key the effect on the
   * domain object rather than the event (StepOptions; docs/handlers.md says when to).
   */
  step<T>(name: string, fn: (input: StepInput) => Promise<T & NoInfer<JsonChecked<T>>>, options?: StepOptions): Promise<T>;
  /**
   * Inside a local step (`ctx.transaction`'s function) only: orders updates of one domain
   * object when the provider does not. Records `version` as the newest update of `objectKey`
   * this handler applied, unless a newer one was applied already: then `stale` is true and the
   * step should write nothing (return something that says so: it is recorded). The record
   * commits or rolls back with the step. Equal versions are not stale.
   *
   * `version`: the provider's ordering field of the object, as a number or a Date (Stripe: the
   * event's `created`, i.e. `event.signedAt`; Shopify: the resource's `updated_at`). Use one unit
   * per object key. Throws StepUsageError outside a local step.
   */
  ordered(objectKey: string, version: number | Date): Promise<Ordering>;
  /**
   * Inside a local step only: waits for, then holds until the step commits, a lock on
   * `objectKey` (a Postgres transaction-scoped advisory lock), so local steps of any handler
   * about the same object run one at a time. For read-then-write logic on an object (a
   * balance, an order's paid total) without writing `SELECT ... FOR UPDATE` yourself. Take
   * locks of several objects in one order everywhere, or two steps can deadlock (Postgres
   * then aborts one, which is retried). Throws StepUsageError outside a local step.
   */
  lock(objectKey: string): Promise<void>;
}

/** What `ctx.ordered` found. */
export interface Ordering {
  /** A newer update of this object was applied already: write nothing. */
  readonly stale: boolean;
  /**
   * The newest version applied before this call (null: the first update of this object). A
   * step recording the same object at the same moment is waited for: `previous` includes it
   * once it committed.
   */
  readonly previous: number | null;
  /** This update's version as recorded (a Date becomes epoch milliseconds). */
  readonly version: number;
}
