/**
 * What `event.payload` is, per provider kind and event type.
 *
 * The providers' own types are optional: a Stripe-only project has no `@octokit/webhooks`, a
 * GitHub-only one no `stripe`. So this module names no provider package. It keeps a registry,
 * `ProviderEventTypes`, empty here, that each provider's entry point fills in when imported
 * (TypeScript module augmentation, types only, nothing runs):
 *
 *   import '@oncehook/sdk/stripe';   // needs the `stripe` package: Stripe.Event, narrowed by type
 *   import '@oncehook/sdk/github';   // needs `@octokit/webhooks`: its event map
 *
 * (once anywhere in the project, e.g. in the handler file). Then for a registered kind:
 *
 * - Stripe: `charge.refunded` -> `Stripe.ChargeRefundedEvent`; a type Stripe's list does not
 *   know is a compile error.
 * - GitHub: the event name, plus `.<action>` when the payload has one (`push`,
 *   `issues.opened`); a handler for `issues` receives every `issues.*` event, typed as their
 *   union.
 * - A kind not registered (and every other kind): any type name, and `unknown` payloads,
 *   unless the handler gives a `payload` zod schema, which is also checked at run time.
 */

/**
 * The senders verified by a table entry (@oncehook/shared's senders.ts, "schemes as data"):
 * the names live here so that handlers can be typed by them; the type checker makes the
 * table hold one entry for each.
 */
export const SENDER_KINDS = [
  'linear',
  'intercom',
  'hubspot',
  'square',
  'sendgrid',
  'mailgun',
  'postmark',
  'gitlab',
  'bitbucket',
  'sentry',
  'vercel',
  'typeform',
  'calendly',
  'lemonsqueezy',
  'woocommerce',
  'coinbase-commerce',
  'zoom',
  'twitch',
  'meta',
  'discord',
  'paystack',
  'razorpay',
  'mux',
  'twilio',
] as const;
export type SenderKind = (typeof SENDER_KINDS)[number];

/** The kinds with an adapter of their own, and the generic in-house `hmac`. */
export const ADAPTER_KINDS = ['stripe', 'github', 'shopify', 'standard-webhooks', 'slack', 'paddle', 'hmac'] as const;

/** The provider families Oncehook verifies (a source's `kind`). */
export type ProviderKind = (typeof ADAPTER_KINDS)[number] | SenderKind;

export const PROVIDER_KINDS: readonly ProviderKind[] = [...ADAPTER_KINDS, ...SENDER_KINDS];

/**
 * The typed kinds: for each, a map from event type to payload. Filled in by
 * `@oncehook/sdk/stripe` and `@oncehook/sdk/github`; empty until one is imported.
 */
// biome-ignore lint/suspicious/noEmptyInterface: a registry that provider entry points augment
export interface ProviderEventTypes {}

/** The event types a handler may name for a kind: the provider's list when registered, else any string. */
export type EventTypeFor<K> = K extends keyof ProviderEventTypes ? keyof ProviderEventTypes[K] & string : string;

/** The payload type of (kind, type) without a schema. */
export type ProviderPayload<K, T> = K extends keyof ProviderEventTypes ? (T extends keyof ProviderEventTypes[K] ? ProviderEventTypes[K][T] : unknown) : unknown;
