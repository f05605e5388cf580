/** Signed deliveries for the example domain's flows. */
import { PROVIDER_CASES, signStripe, type Delivery } from '@oncehook/harness';

const shopify = PROVIDER_CASES.find((c) => c.source === 'shopify')!;
const standard = PROVIDER_CASES.find((c) => c.source === 'standard-webhooks')!;

export async function shopifyOrder(n: number, totalCents = 1250): Promise<Delivery> {
  const body = JSON.stringify({
    id: 5_000_000 + n,
    email: `buyer${n}@example.com`,
    currency: 'USD',
    total_price: (totalCents / 100).toFixed(2),
    customer: { id: 700 + n },
    line_items: [{ sku: `sku-${n}`, quantity: 1 }],
    shipping_address: { address1: `${n} Main St`, city: 'Springfield' },
  });
  return shopify.sign(body, { id: `wh-order-${n}` });
}

export function stripeOrderPayment(opts: { eventId: string; orderId: string; amount: number; total: number; customer?: string }) {
  return signStripe({
    id: opts.eventId,
    object: 'event',
    type: 'payment_intent.succeeded',
    created: Math.floor(Date.now() / 1000),
    data: {
      object: {
        id: `pi_${opts.eventId}`,
        object: 'payment_intent',
        amount: opts.amount,
        amount_received: opts.amount,
        currency: 'usd',
        customer: opts.customer ?? 'cus_orders',
        receipt_email: 'orders@example.com',
        metadata: { order_id: opts.orderId, order_total: String(opts.total), address: '9 Elm St', sku: 'sku-x' },
      },
    },
  });
}

export async function renewal(n: number, amount = 2000): Promise<Delivery> {
  const body = JSON.stringify({
    type: 'subscription.renewed',
    timestamp: new Date().toISOString(),
    data: { subscription_id: `sub_${n}`, customer_id: `cus_sub_${n}`, amount, currency: 'usd' },
  });
  return standard.sign(body, { id: `msg_renewal_${n}` });
}

export function customerUpdated(eventId: string, created: number, email: string) {
  return signStripe({ id: eventId, object: 'event', type: 'customer.updated', created, data: { object: { id: 'cus_profile', email, name: email.split('@')[0] } } });
}
