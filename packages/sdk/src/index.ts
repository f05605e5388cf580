/**
 * @oncehook/sdk: write webhook handlers whose effects happen exactly once.
 *
 * - defineHandler({ name, source, type, payload? }, async (event, ctx) => ...)
 * - ctx.transaction(name, fn, { final? }): a local step (fenced transaction, recorded)
 * - ctx.step(name, fn): an external step (idempotency key handed in, recorded)
 * - PermanentError: retrying cannot help; LeaseLostError: stop, another worker owns the run
 *   (branded: recognised across copies of this package; isPermanentError(error) and friends)
 * - readSettings({...zod}): a handler module's own environment, validated at worker start
 * - createOutboundClient: an HTTP client that sends the key and retries safely
 *
 * Testing a handler against duplicates, concurrency and crashes: @oncehook/testkit.
 * Guide: docs/handlers.md.
 */
export {
  defineHandler,
  isHandler,
  HANDLER_NAME_PATTERN,
  type Handler,
  type HandlerOptions,
  type HandlerRetries,
  type HandlerConcurrency,
  type HandlerRateLimit,
  type HandlerPriority,
  type HandlerLimits,
} from './define-handler.js';
export type { HandlerContext, HandlerEvent, Json, JsonChecked, Logger, Ordering, PoolClient, StepInput, StepOptions, TransactionOptions } from './context.js';
export {
  ADAPTER_KINDS,
  PROVIDER_KINDS,
  SENDER_KINDS,
  type SenderKind,
  type EventTypeFor,
  type ProviderEventTypes,
  type ProviderKind,
  type ProviderPayload,
} from './provider-events.js';
export { readSettings } from './settings.js';
export {
  ConfigError,
  HandlerDefinitionError,
  isConfigError,
  isHandlerDefinitionError,
  isLeaseLostError,
  isPermanentError,
  LeaseLostError,
  OutboundUnavailableError,
  PermanentError,
  RetryLaterError,
  retryLaterMs,
  StepUsageError,
} from './errors.js';
export {
  createOutboundClient,
  parseRetryAfter,
  type OutboundClient,
  type OutboundClientOptions,
  type OutboundOutcome,
  type OutboundRequest,
  type OutboundResponse,
  observeOutbound,
} from './outbound-client.js';
