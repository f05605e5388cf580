/**
 * Stripe deliveries signed by the official `stripe` SDK (the test oracle: sign with theirs,
 * verify with ours).
 */
import Stripe from 'stripe';
import { postDelivery, type Delivery } from './net.js';

export const STRIPE_SECRET = 'whsec_test_oncehook_secret';

const stripe = new Stripe('sk_test_oncehook');

export function paymentSucceeded(eventId: string, opts: { account?: string; amount?: number; created?: number } = {}) {
  return {
    id: eventId,
    object: 'event',
    type: 'payment_intent.succeeded',
    created: opts.created ?? Math.floor(Date.now() / 1000),
    livemode: false,
    data: {
      object: {
        id: `pi_${eventId}`,
        object: 'payment_intent',
        amount: opts.amount ?? 1000,
        amount_received: opts.amount ?? 1000,
        currency: 'usd',
        customer: opts.account ?? 'cus_test',
      },
    },
  };
}

export function signStripe(event: unknown, opts: { secret?: string; timestamp?: number } = {}): Delivery & { body: string } {
  const body = typeof event === 'string' ? event : JSON.stringify(event);
  const header = stripe.webhooks.generateTestHeaderString({
    payload: body,
    secret: opts.secret ?? STRIPE_SECRET,
    timestamp: opts.timestamp ?? Math.floor(Date.now() / 1000),
  });
  return { body, headers: { 'content-type': 'application/json', 'stripe-signature': header } };
}

export async function deliver(baseUrl: string, delivery: Delivery, provider = 'stripe'): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const response = await postDelivery(`${baseUrl}/webhooks/${provider}`, { body: delivery.body, headers: delivery.headers });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { raw: text };
  }
  return { status: response.status, json, headers: response.headers };
}
