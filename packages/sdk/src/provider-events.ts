/**
 * What `event.payload` is, per provider kind and event type, from the providers' own types
 * (type-only imports: nothing of them runs):
 *
 * - Stripe: the `stripe` package's `Stripe.Event` union, narrowed by `type`
 *   (`charge.refunded` -> `Stripe.ChargeRefundedEvent`). A type Stripe's list does not know
 *   is a compile error.
 * - GitHub: `@octokit/webhooks`' event map, by Oncehook's GitHub type: the event name, plus
 *   `.<action>` when the payload has one (`push`, `issues.opened`). A handler for `issues`
 *   receives every `issues.*` event, typed as their union.
 * - Every other kind: `unknown`, unless the handler gives a `payload` zod schema, which is
 *   also checked at run time.
 */
import type { EmitterWebhookEvent, EmitterWebhookEventName } from '@octokit/webhooks';
import type Stripe from 'stripe';

/** The provider families Oncehook verifies (a source's `kind`). */
export type ProviderKind = 'stripe' | 'github' | 'shopify' | 'standard-webhooks' | 'slack' | 'paddle' | 'hmac';

export const PROVIDER_KINDS: readonly ProviderKind[] = ['stripe', 'github', 'shopify', 'standard-webhooks', 'slack', 'paddle', 'hmac'];

/** Event type names, where the provider publishes the list. */
export interface KnownEventTypes {
  stripe: Stripe.Event['type'];
  github: EmitterWebhookEventName;
}

export type StripeEventType = KnownEventTypes['stripe'];
export type GitHubEventType = KnownEventTypes['github'];

/** The Stripe event of one type (`Stripe.ChargeRefundedEvent` for `charge.refunded`). */
export type StripeEvent<T extends StripeEventType> = Extract<Stripe.Event, { type: T }>;

/** The GitHub payload of one event (`push`) or event and action (`issues.opened`). */
export type GitHubPayload<T extends GitHubEventType> = EmitterWebhookEvent<T>['payload'];

/** The event types a handler may name for a kind: the provider's list, or any string. */
export type EventTypeFor<K> = K extends keyof KnownEventTypes ? KnownEventTypes[K] : string;

/** The payload type of (kind, type) without a schema. */
export type ProviderPayload<K, T> = K extends 'stripe'
  ? T extends StripeEventType
    ? StripeEvent<T>
    : unknown
  : K extends 'github'
    ? T extends GitHubEventType
      ? GitHubPayload<T>
      : unknown
    : unknown;
