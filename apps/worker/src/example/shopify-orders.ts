/**
 * Shopify `orders/create`: charge the customer through the payment API (Idempotency-Key from
 * the step), record the order as paid and credit the ledger (local, serialized per order),
 * email a receipt, request shipment, record both (completing the event).
 */
import { PermanentError, type EffectClients } from '@oncehook/shared';
import type { HandlerRegistry } from '../handlers';
import { receiptAndShip, recordPayment, type OrderFacts } from './orders';

interface ShopifyOrder {
  id?: unknown;
  email?: unknown;
  currency?: unknown;
  total_price?: unknown;
  customer?: { id?: unknown };
  line_items?: { sku?: unknown; quantity?: unknown }[];
  shipping_address?: { address1?: unknown; city?: unknown };
}

export function toOrderFacts(payload: ShopifyOrder): OrderFacts {
  const total = typeof payload.total_price === 'string' ? Math.round(Number.parseFloat(payload.total_price) * 100) : Number.NaN;
  if ((typeof payload.id !== 'number' && typeof payload.id !== 'string') || typeof payload.email !== 'string' || !Number.isSafeInteger(total) || total <= 0) {
    throw new PermanentError('orders/create needs id, email and a positive total_price');
  }
  const customer = payload.customer?.id;
  return {
    orderId: `shopify-${String(payload.id)}`,
    customerId: customer === undefined ? payload.email : `shopify-customer-${String(customer)}`,
    email: payload.email,
    currency: typeof payload.currency === 'string' ? payload.currency.toLowerCase() : 'usd',
    totalCents: total,
    address: [payload.shipping_address?.address1, payload.shipping_address?.city].filter((part) => typeof part === 'string').join(', ') || 'address on file',
    items: (payload.line_items ?? []).map((item) => ({ sku: typeof item.sku === 'string' ? item.sku : 'unknown', quantity: typeof item.quantity === 'number' ? item.quantity : 1 })),
  };
}

export function registerShopifyOrderHandlers(registry: HandlerRegistry, clients: EffectClients): void {
  registry.on<ShopifyOrder>('shopify', 'orders/create', async (event, ctx) => {
    const order = toOrderFacts(event.payload);
    const charge = await ctx.step('charge', ({ idempotencyKey, signal }) =>
      clients.payment.charge({ customer: order.customerId, amount: order.totalCents, currency: order.currency, description: `Order ${order.orderId}` }, idempotencyKey, signal),
    );
    const { becamePaid } = await ctx.transaction('record-order', (tx) => recordPayment(tx, order, order.totalCents, charge.id));
    await receiptAndShip(ctx, clients, order, order.totalCents, becamePaid);
  });
}
