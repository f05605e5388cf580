/**
 * The shop's three effect APIs (payment, email, fulfilment), with their settings. Each call
 * takes the idempotency key its step hands in; the API uses it to apply the effect at most once.
 *
 * - payment: `Idempotency-Key` header, Stripe's semantics (same key + same parameters -> the
 *   stored response replayed; different parameters -> 400; still in flight -> 409).
 * - email: the provider's dedupe field in the body (`dedupe_key`), as many email APIs do.
 * - fulfilment: `Idempotency-Key` header.
 *
 * Settings (read when the worker loads the example; a bad value stops it at start):
 *   SHOP_PAYMENT_API_URL, SHOP_EMAIL_API_URL, SHOP_FULFILMENT_API_URL  where the APIs are
 *     (the sandbox's, `npm run start:sandbox`, in development and tests)
 *   SHOP_OUTBOUND_TIMEOUT_MS, SHOP_OUTBOUND_MAX_TRIES, SHOP_OUTBOUND_RETRY_DELAY_MS
 */
import { createOutboundClient, readSettings } from '@oncehook/sdk';
import { z } from 'zod';

export interface Charge {
  id: string;
  amount: number;
  currency: string;
  customer: string;
}

export interface EmailReceipt {
  id: string;
}

export interface Shipment {
  id: string;
  order_id: string;
}

export interface ShopClients {
  payment: { charge(input: { customer: string; amount: number; currency: string; description: string }, idempotencyKey: string, signal?: AbortSignal): Promise<Charge> };
  email: { send(input: { to: string; subject: string; text: string }, dedupeKey: string, signal?: AbortSignal): Promise<EmailReceipt> };
  fulfilment: {
    requestShipment(input: { orderId: string; address: string; items: { sku: string; quantity: number }[] }, idempotencyKey: string, signal?: AbortSignal): Promise<Shipment>;
  };
}

const integer = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export function shopSettings(env: Record<string, string | undefined> = process.env) {
  return readSettings(
    {
      SHOP_PAYMENT_API_URL: z.string().url(),
      SHOP_EMAIL_API_URL: z.string().url(),
      SHOP_FULFILMENT_API_URL: z.string().url(),
      /** Per-try timeout: shorter than LEASE_MS, so a hung API cannot outlive the lease. */
      SHOP_OUTBOUND_TIMEOUT_MS: integer(100, 120_000).default(10_000),
      /** Tries per call (first included) before the step fails and the run retries later, same key. */
      SHOP_OUTBOUND_MAX_TRIES: integer(1, 20).default(4),
      /** First delay between tries; doubles, full jitter, capped at 5 s; Retry-After honoured. */
      SHOP_OUTBOUND_RETRY_DELAY_MS: integer(0, 60_000).default(200),
    },
    env,
  );
}

export function createShopClients(settings: ReturnType<typeof shopSettings>): ShopClients {
  const shared = { timeoutMs: settings.SHOP_OUTBOUND_TIMEOUT_MS, maxTries: settings.SHOP_OUTBOUND_MAX_TRIES, baseDelayMs: settings.SHOP_OUTBOUND_RETRY_DELAY_MS };
  const payment = createOutboundClient({ ...shared, name: 'payment', baseUrl: settings.SHOP_PAYMENT_API_URL });
  const email = createOutboundClient({ ...shared, name: 'email', baseUrl: settings.SHOP_EMAIL_API_URL });
  const fulfilment = createOutboundClient({ ...shared, name: 'fulfilment', baseUrl: settings.SHOP_FULFILMENT_API_URL });
  return {
    payment: {
      async charge(input, idempotencyKey, signal) {
        return (await payment.request<Charge>({ method: 'POST', path: '/v1/charges', body: input, idempotencyKey, signal })).body;
      },
    },
    email: {
      async send(input, dedupeKey, signal) {
        return (await email.request<EmailReceipt>({ method: 'POST', path: '/emails', body: input, idempotencyKey: dedupeKey, idempotencyKeyField: 'dedupe_key', signal })).body;
      },
    },
    fulfilment: {
      async requestShipment(input, idempotencyKey, signal) {
        const body = { order_id: input.orderId, address: input.address, items: input.items };
        return (await fulfilment.request<Shipment>({ method: 'POST', path: '/shipments', body, idempotencyKey, signal })).body;
      },
    },
  };
}
