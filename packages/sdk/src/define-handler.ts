/**
 * defineHandler: one of the user's handlers, for one (source, type).
 *
 *   export default defineHandler(
 *     { name: 'refund-emails', source: 'stripe', type: 'charge.refunded' },
 *     async (event, ctx) => {
 *       const charge = event.payload.data.object;            // Stripe.Charge, typed
 *       await ctx.step('email', ({ idempotencyKey }) => email.send({ ... }, idempotencyKey));
 *     },
 *   );
 *
 * The worker loads handlers from the modules named in ONCEHOOK_HANDLERS (a module's default
 * export is a handler or an array of them).
 */
import { HandlerDefinitionError } from './errors.js';
import type { z } from 'zod';
import type { HandlerContext, HandlerEvent } from './context.js';
import { type EventTypeFor, PROVIDER_KINDS, type ProviderKind, type ProviderPayload } from './provider-events.js';

/**
 * The brand every handler carries, under a key shared by every copy of this package
 * (Symbol.for): a worker recognises handlers made by a handler module's own copy of the SDK.
 * Not part of the Handler type (a `unique symbol` type would differ between two copies of these
 * declarations, and a handler of one copy would not type-check where the other's is expected).
 */
// mutant: handler-brand-per-copy
const HANDLER_BRAND = Symbol.for('oncehook.handler');

/** A handler's name: the id of its runs, step records, outbound keys and metric series. */
export const HANDLER_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const SOURCE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const TYPE_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** The kind a handler's types come from: `kind` when given, else `source` when it names a kind. */
type KindOf<Source extends string, Kind> = Kind extends ProviderKind ? Kind : Source extends ProviderKind ? Source : 'custom';

type PayloadOf<Kind, Type, Schema> = Schema extends z.ZodType ? z.output<Schema> : ProviderPayload<Kind, Type>;

/**
 * The types a handler may name: the provider's list (Stripe, GitHub), so a typo does not
 * compile; any string when the handler gives a `payload` schema (a type newer than your
 * provider package, or a kind without published types), since the schema then describes it.
 */
type TypeFor<Kind, Schema> = Schema extends z.ZodType ? string : EventTypeFor<Kind>;

export interface HandlerOptions<Source extends string, Kind extends ProviderKind | undefined, Type extends string, Schema extends z.ZodType | undefined> {
  /**
   * Required, unique among the handlers a worker loads, and STABLE: it names this handler's
   * runs, step records, outbound idempotency keys, logs and metrics. Renaming a handler while
   * events are in flight makes those events run the renamed one from scratch. 1-63
   * characters of a-z 0-9 . _ -.
   */
  name: string;
  /**
   * Which deliveries: a provider kind (`stripe`: every Stripe source) or one source's name
   * (`stripe-eu`: that source only).
   */
  source: Source;
  /** The source's kind, when `source` is a source name: it types the payload (`kind: 'stripe'`). */
  kind?: Kind;
  /**
   * The event type (Stripe `charge.refunded`, GitHub `push` or `issues.opened`, Shopify
   * `orders/create`, ...). For Stripe and GitHub it must be one their types list, unless the
   * handler gives a `payload` schema.
   */
  type: Type;
  /** A zod schema the payload must match before the handler runs; a mismatch fails the run (PermanentError naming the field). */
  payload?: Schema;
  /** One line for operators (shown in the worker's start log and the admin). */
  description?: string;
  /**
   * This handler's own retry policy, over the worker's (MAX_ATTEMPTS, RETRY_BACKOFF_MS) for
   * what it leaves out: a payment handler may retry for longer, an analytics one give up early.
   * Attempts count every lease taken (crashes included); a PermanentError fails at once.
   */
  retries?: HandlerRetries;
  /**
   * How many runs of this handler may be in progress at once, across EVERY worker process and
   * host (counted in Postgres, so it holds through restarts; a crashed worker's slot is freed
   * when its lease expires, LEASE_MS). A number: fleet-wide (`concurrency: 3`). An object:
   * per key (`{ key: (event) => event.payload.customer, limit: 1 }`: runs about one customer
   * never overlap; different customers run side by side). A run over the limit WAITS (state
   * `received`, reason `concurrency`): it is not an attempt and is never dropped.
   */
  concurrency?: number | HandlerConcurrency<PayloadOf<KindOf<Source, Kind>, Type, Schema>>;
  /**
   * Runs START no faster than `limit` per `period` across the fleet (optionally per key): an
   * email API that allows 10 requests/s gets `{ limit: 10, period: '1s' }`. Counted in fixed
   * windows of one period, so any `period`-long stretch sees at most 2 x limit starts. Excess
   * runs wait for the next window (reason `rate-limit`): not attempts, never dropped.
   */
  rateLimit?: HandlerRateLimit<PayloadOf<KindOf<Source, Kind>, Type, Schema>>;
  /**
   * When the workers are saturated, runs of higher-priority handlers start first: `high`,
   * `normal` (the default), `low`. A waiting run is never starved: after PRIORITY_AGING_MS
   * in the queue it is moved to the front (docs/flow-control.md).
   */
  priority?: HandlerPriority;
  /**
   * Opt-in circuit breaker: after this many failed attempts in a row (across the fleet; a
   * success resets the count), the handler PAUSES itself with the last error as its reason,
   * and `oncehook_paused` says so (alert OncehookHandlerPaused). Its events keep being
   * received and wait; resuming is manual (`oncehook resume handler <name>`).
   */
  circuitBreaker?: { consecutiveFailures: number };
}

/** Per-key concurrency (`concurrency: { key, limit }` in defineHandler). */
export interface HandlerConcurrency<Payload = unknown> {
  /** Runs of one key at once: 1 to 10000. */
  limit: number;
  /** The key of an event's run (a customer, an order, a repository): a non-empty string, at most 200 characters. */
  key(event: HandlerEvent<Payload>): string;
}

/** `rateLimit` in defineHandler. */
export interface HandlerRateLimit<Payload = unknown> {
  /** Runs started per period: 1 to 100000. */
  limit: number;
  /** `'500ms'`, `'1s'`, `'10s'`, `'1m'`, `'1h'`, or milliseconds: 100 ms to 24 h. */
  period: string | number;
  /** Optional: a limit per key instead of one for the whole handler. */
  key?(event: HandlerEvent<Payload>): string;
}

/** `priority` in defineHandler. */
export type HandlerPriority = 'high' | 'normal' | 'low';

/** A handler's limits, checked and normalised (what the engine reads). */
export interface HandlerLimits<Payload = unknown> {
  concurrency?: { limit: number; key?(event: HandlerEvent<Payload>): string };
  rateLimit?: { limit: number; periodMs: number; key?(event: HandlerEvent<Payload>): string };
  /** Consecutive failed attempts before the handler pauses itself. */
  breakerAfter?: number;
}

/** A handler's retry policy (`retries` in defineHandler). */
export interface HandlerRetries {
  /** Attempts a run gets before it is failed (the dead letter): 1 to 1000. */
  maxAttempts?: number;
  /** Delay before the first retry, doubling per attempt (capped at 10 minutes, half jitter): 0 to 600000 ms. */
  backoffMs?: number;
}

/** A handler, as the worker loads it. Made only by defineHandler. */
export interface Handler<Payload = unknown> {
  readonly name: string;
  readonly source: string;
  readonly kind: ProviderKind | undefined;
  readonly type: string;
  readonly payloadSchema: z.ZodType | undefined;
  readonly description: string | undefined;
  /** Its own retry policy, when it gives one (the engine merges it over the worker's). */
  readonly retries: Readonly<HandlerRetries> | undefined;
  /** Its concurrency, rate limit and circuit breaker, when it declares any. */
  readonly limits: Readonly<HandlerLimits<Payload>> | undefined;
  readonly priority: HandlerPriority;
  /**
   * The user's function. (A method signature on purpose: a Handler of a specific payload is
   * then usable wherever any Handler is expected, as the worker's registry takes them all.)
   */
  handle(event: HandlerEvent<Payload>, ctx: HandlerContext): Promise<void>;
}

export function defineHandler<
  const Source extends string,
  const Type extends TypeFor<KindOf<Source, Kind>, Schema>,
  const Kind extends ProviderKind | undefined = undefined,
  Schema extends z.ZodType | undefined = undefined,
>(
  options: HandlerOptions<Source, Kind, Type, Schema>,
  handle: (event: HandlerEvent<PayloadOf<KindOf<Source, Kind>, Type, Schema>>, ctx: HandlerContext) => Promise<void>,
): Handler<PayloadOf<KindOf<Source, Kind>, Type, Schema>> {
  const where = `defineHandler(${JSON.stringify(options?.name ?? '(no name)')})`;
  if (typeof options !== 'object' || options === null) throw new HandlerDefinitionError('defineHandler(options, handle): options must be an object with name, source and type');
  if (typeof options.name !== 'string' || !HANDLER_NAME_PATTERN.test(options.name)) {
    throw new HandlerDefinitionError(`${where}: name is required: 1-63 characters of a-z 0-9 . _ - (it names the handler's runs, steps, keys and metrics, so keep it stable)`);
  }
  if (typeof options.source !== 'string' || !SOURCE_PATTERN.test(options.source)) {
    throw new HandlerDefinitionError(`${where}: source must be a provider kind (${PROVIDER_KINDS.join(', ')}) or a source name (a-z 0-9 _ -)`);
  }
  if (options.kind !== undefined && !PROVIDER_KINDS.includes(options.kind)) {
    throw new HandlerDefinitionError(`${where}: kind must be one of ${PROVIDER_KINDS.join(', ')}`);
  }
  if (typeof options.type !== 'string' || !TYPE_PATTERN.test(options.type)) {
    throw new HandlerDefinitionError(`${where}: type must be the event type, a non-empty string of printable ASCII (e.g. "charge.refunded")`);
  }
  if (options.payload !== undefined && typeof (options.payload as { safeParse?: unknown }).safeParse !== 'function') {
    throw new HandlerDefinitionError(`${where}: payload must be a zod schema (z.object({ ... }))`);
  }
  if (typeof handle !== 'function') throw new HandlerDefinitionError(`${where}: the second argument must be the handler function, async (event, ctx) => { ... }`);
  const retries = checkRetries(where, options.retries);
  const limits = checkLimits(where, options);
  const priority = options.priority ?? 'normal';
  if (!PRIORITIES.includes(priority)) throw new HandlerDefinitionError(`${where}: priority must be "high", "normal" or "low" (got ${JSON.stringify(priority)})`);
  const kind = options.kind ?? (PROVIDER_KINDS.includes(options.source as ProviderKind) ? (options.source as ProviderKind) : undefined);
  return Object.freeze({
    [HANDLER_BRAND]: true as const,
    name: options.name,
    source: options.source,
    kind,
    type: options.type,
    payloadSchema: options.payload,
    description: options.description,
    retries,
    limits: limits as Handler<PayloadOf<KindOf<Source, Kind>, Type, Schema>>['limits'],
    priority,
    handle: handle as Handler<PayloadOf<KindOf<Source, Kind>, Type, Schema>>['handle'],
  });
}

/** `retries`, checked loudly: unknown keys, and numbers out of range, say what to write instead. */
function checkRetries(where: string, retries: unknown): Readonly<HandlerRetries> | undefined {
  if (retries === undefined) return undefined;
  if (typeof retries !== 'object' || retries === null || Array.isArray(retries)) {
    throw new HandlerDefinitionError(`${where}: retries must be an object, { maxAttempts?: number, backoffMs?: number }`);
  }
  const unknown = Object.keys(retries).filter((key) => key !== 'maxAttempts' && key !== 'backoffMs');
  if (unknown.length > 0) throw new HandlerDefinitionError(`${where}: retries has no ${unknown.map((k) => `"${k}"`).join(', ')}; it takes maxAttempts and backoffMs`);
  const { maxAttempts, backoffMs } = retries as HandlerRetries;
  if (maxAttempts !== undefined && !(Number.isInteger(maxAttempts) && maxAttempts >= 1 && maxAttempts <= 1000)) {
    throw new HandlerDefinitionError(`${where}: retries.maxAttempts must be a whole number from 1 to 1000 (got ${String(maxAttempts)})`);
  }
  if (backoffMs !== undefined && !(Number.isInteger(backoffMs) && backoffMs >= 0 && backoffMs <= 600_000)) {
    throw new HandlerDefinitionError(`${where}: retries.backoffMs must be a whole number of milliseconds from 0 to 600000 (got ${String(backoffMs)})`);
  }
  return Object.freeze({ ...(maxAttempts === undefined ? {} : { maxAttempts }), ...(backoffMs === undefined ? {} : { backoffMs }) });
}

const PRIORITIES: readonly HandlerPriority[] = ['high', 'normal', 'low'];
const PERIOD_UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;

/** `'1s'`, `'500ms'`, `'2m'`, `'1h'` or a number of ms -> ms; null when it is none of those. */
function periodMs(period: unknown): number | null {
  if (typeof period === 'number') return Number.isInteger(period) ? period : null;
  if (typeof period !== 'string') return null;
  const match = /^(\d{1,9})(ms|s|m|h)$/.exec(period);
  return match ? Number(match[1]) * PERIOD_UNITS[match[2] as keyof typeof PERIOD_UNITS] : null;
}

const wholeIn = (value: unknown, min: number, max: number): value is number => Number.isInteger(value) && (value as number) >= min && (value as number) <= max;

/** `concurrency`, `rateLimit` and `circuitBreaker`, checked loudly: each mistake says what to write. */
function checkLimits(where: string, options: { concurrency?: unknown; rateLimit?: unknown; circuitBreaker?: unknown }): Readonly<HandlerLimits> | undefined {
  const limits: HandlerLimits = {};
  const { concurrency, rateLimit, circuitBreaker } = options;
  if (concurrency !== undefined) {
    if (typeof concurrency === 'number') {
      if (!wholeIn(concurrency, 1, 10_000))
        throw new HandlerDefinitionError(`${where}: concurrency must be a whole number from 1 to 10000 (got ${String(concurrency)}); leave it out for no limit`);
      limits.concurrency = { limit: concurrency };
    } else if (typeof concurrency === 'object' && concurrency !== null && !Array.isArray(concurrency)) {
      const { key, limit, ...rest } = concurrency as { key?: unknown; limit?: unknown };
      if (Object.keys(rest).length > 0)
        throw new HandlerDefinitionError(
          `${where}: concurrency has no ${Object.keys(rest)
            .map((k) => `"${k}"`)
            .join(', ')}; it takes { key: (event) => string, limit: number }`,
        );
      if (typeof key !== 'function')
        throw new HandlerDefinitionError(
          `${where}: concurrency.key must be a function (event) => string (e.g. (event) => event.payload.customer); for one fleet-wide limit write concurrency: N`,
        );
      if (!wholeIn(limit, 1, 10_000)) throw new HandlerDefinitionError(`${where}: concurrency.limit must be a whole number from 1 to 10000 (got ${String(limit)})`);
      limits.concurrency = { limit, key: key as (event: HandlerEvent) => string };
    } else {
      throw new HandlerDefinitionError(`${where}: concurrency must be a number (fleet-wide) or { key: (event) => string, limit: number } (per key)`);
    }
  }
  if (rateLimit !== undefined) {
    if (typeof rateLimit !== 'object' || rateLimit === null || Array.isArray(rateLimit))
      throw new HandlerDefinitionError(`${where}: rateLimit must be { limit: number, period: '1s' }`);
    const { limit, period, key, ...rest } = rateLimit as { limit?: unknown; period?: unknown; key?: unknown };
    if (Object.keys(rest).length > 0)
      throw new HandlerDefinitionError(
        `${where}: rateLimit has no ${Object.keys(rest)
          .map((k) => `"${k}"`)
          .join(', ')}; it takes limit, period and key`,
      );
    if (!wholeIn(limit, 1, 100_000)) throw new HandlerDefinitionError(`${where}: rateLimit.limit must be a whole number of runs from 1 to 100000 (got ${String(limit)})`);
    const ms = periodMs(period);
    if (ms === null || ms < 100 || ms > 86_400_000)
      throw new HandlerDefinitionError(
        `${where}: rateLimit.period must be a duration from 100ms to 24h, like '1s', '500ms', '1m' or a number of milliseconds (got ${JSON.stringify(period)})`,
      );
    if (key !== undefined && typeof key !== 'function')
      throw new HandlerDefinitionError(`${where}: rateLimit.key must be a function (event) => string, or left out for one limit for the whole handler`);
    limits.rateLimit = { limit, periodMs: ms, ...(key ? { key: key as (event: HandlerEvent) => string } : {}) };
  }
  if (circuitBreaker !== undefined) {
    const after = (circuitBreaker as { consecutiveFailures?: unknown } | null)?.consecutiveFailures;
    if (typeof circuitBreaker !== 'object' || circuitBreaker === null || Object.keys(circuitBreaker).some((k) => k !== 'consecutiveFailures') || !wholeIn(after, 1, 10_000)) {
      throw new HandlerDefinitionError(
        `${where}: circuitBreaker must be { consecutiveFailures: N } with N a whole number from 1 to 10000 (failed attempts in a row before the handler pauses itself)`,
      );
    }
    limits.breakerAfter = after;
  }
  return Object.keys(limits).length === 0 ? undefined : Object.freeze(limits);
}

export function isHandler(value: unknown): value is Handler {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[HANDLER_BRAND] === true;
}
