/**
 * `@oncehook/sdk/stripe`: Stripe's event types for handlers of `stripe` sources. Import it once
 * (`import '@oncehook/sdk/stripe';`, types only; needs the `stripe` package): a handler's
 * `type` is then checked against Stripe's list and its payload is the matching Stripe.Event
 * (`charge.refunded` -> `Stripe.ChargeRefundedEvent`). Also re-exports the whole SDK.
 */
import type Stripe from 'stripe';

export * from './index.js';

/** Stripe's event type names. */
export type StripeEventType = Stripe.Event['type'];

/** The Stripe event of one type (`Stripe.ChargeRefundedEvent` for `charge.refunded`). */
export type StripeEvent<T extends StripeEventType> = Extract<Stripe.Event, { type: T }>;

declare module './provider-events.js' {
  interface ProviderEventTypes {
    stripe: { [T in StripeEventType]: StripeEvent<T> };
  }
}
