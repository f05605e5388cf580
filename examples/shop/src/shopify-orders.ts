/**
 * Shopify `orders/create`: charge the customer through the payment API (Idempotency-Key from
 * the step), record the order as paid and credit the ledger (local, serialized per order),
 * email a receipt, request shipment, record both (the final step).
 */
import { defineHandler } from '@oncehook/sdk';
import { z } from 'zod';
import type { ShopClients } from './clients';
import { receiptAndShip, recordPayment, type OrderFacts } from './orders';

const ShopifyOrder = z.object({
  id: z.union([z.number().int(), z.string().min(1)]),
  email: z.string().min(3),
  currency: z.string().optional(),
  total_price: z.string().regex(/^\d+(\.\d{1,2})?$/, 'a decimal amount such as "12.50"'),
  customer: z.object({ id: z.union([z.number(), z.string()]).optional() }).optional(),
  line_items: z.array(z.object({ sku: z.string().nullish(), quantity: z.number().int().positive().optional() })).default([]),
  shipping_address: z.object({ address1: z.string().nullish(), city: z.string().nullish() }).nullish(),
});

export function toOrderFacts(payload: z.output<typeof ShopifyOrder>): OrderFacts {
  return {
    orderId: `shopify-${String(payload.id)}`,
    customerId: payload.customer?.id === undefined ? payload.email : `shopify-customer-${String(payload.customer.id)}`,
    email: payload.email,
    currency: (payload.currency ?? 'usd').toLowerCase(),
    totalCents: Math.round(Number.parseFloat(payload.total_price) * 100),
    address: [payload.shipping_address?.address1, payload.shipping_address?.city].filter((part) => typeof part === 'string').join(', ') || 'address on file',
    items: payload.line_items.map((item) => ({ sku: item.sku ?? 'unknown', quantity: item.quantity ?? 1 })),
  };
}

export function shopifyOrderHandler(clients: ShopClients) {
  return defineHandler(
    { name: 'shop.shopify-orders', source: 'shopify', type: 'orders/create', payload: ShopifyOrder, description: 'charge, record, receipt and ship a Shopify order' },
    async (event, ctx) => {
      const order = toOrderFacts(event.payload);
      const charge = await ctx.step('charge', async ({ idempotencyKey, signal }) => {
        const made = await clients.payment.charge(
          { customer: order.customerId, amount: order.totalCents, currency: order.currency, description: `Order ${order.orderId}` },
          idempotencyKey,
          signal,
        );
        return { id: made.id };
      });
      const { becamePaid } = await ctx.transaction('record-order', (tx) => recordPayment(tx, order, order.totalCents, charge.id));
      await receiptAndShip(ctx, clients, order, order.totalCents, becamePaid);
    },
  );
}
