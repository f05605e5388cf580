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

export function isHandler(value: unknown): value is Handler {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[HANDLER_BRAND] === true;
}
