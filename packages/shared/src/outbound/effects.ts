/**
 * Typed clients for the three effect APIs the example domain uses. Each call takes the
 * idempotency key the step hands in; the API uses it to apply the effect at most once.
 *
 * - payment: `Idempotency-Key` header, Stripe's semantics (same key + same parameters ->
 *   the stored response replayed; different parameters -> 400; still in flight -> 409).
 * - email: the provider's dedupe field in the body (`dedupe_key`), as most email APIs do.
 * - fulfilment: `Idempotency-Key` header.
 */
import { createOutboundClient, type OutboundClientOptions } from './http-client';

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

export interface EffectClients {
  payment: { charge(input: { customer: string; amount: number; currency: string; description: string }, idempotencyKey: string, signal?: AbortSignal): Promise<Charge> };
  email: { send(input: { to: string; subject: string; text: string }, dedupeKey: string, signal?: AbortSignal): Promise<EmailReceipt> };
  fulfilment: {
    requestShipment(input: { orderId: string; address: string; items: { sku: string; quantity: number }[] }, idempotencyKey: string, signal?: AbortSignal): Promise<Shipment>;
  };
}

export interface EffectClientsOptions {
  paymentUrl: string;
  emailUrl: string;
  fulfilmentUrl: string;
  timeoutMs?: number;
  maxTries?: number;
  baseDelayMs?: number;
  onOutcome?: OutboundClientOptions['onOutcome'];
}

export function createEffectClients(options: EffectClientsOptions): EffectClients {
  const shared = { timeoutMs: options.timeoutMs, maxTries: options.maxTries, baseDelayMs: options.baseDelayMs, onOutcome: options.onOutcome };
  const payment = createOutboundClient({ ...shared, name: 'payment', baseUrl: options.paymentUrl });
  const email = createOutboundClient({ ...shared, name: 'email', baseUrl: options.emailUrl });
  const fulfilment = createOutboundClient({ ...shared, name: 'fulfilment', baseUrl: options.fulfilmentUrl });
  return {
    payment: {
      async charge(input, idempotencyKey, signal) {
        const res = await payment.request<Charge>({ method: 'POST', path: '/v1/charges', body: input, idempotencyKey, signal });
        return res.body;
      },
    },
    email: {
      async send(input, dedupeKey, signal) {
        const res = await email.request<EmailReceipt>({ method: 'POST', path: '/emails', body: { ...input, dedupe_key: dedupeKey }, signal });
        return res.body;
      },
    },
    fulfilment: {
      async requestShipment(input, idempotencyKey, signal) {
        const res = await fulfilment.request<Shipment>({ method: 'POST', path: '/shipments', body: { order_id: input.orderId, address: input.address, items: input.items }, idempotencyKey, signal });
        return res.body;
      },
    },
  };
}
