/**
 * Shopify `orders/create`: charge the customer through the payment API (Idempotency-Key from
 * the step), record the order as paid and credit the ledger (local, serialized per order),
 * email a receipt, request shipment, record both (the final step).
 *
 * Every effect is keyed on the ORDER, not only on the event (docs/handlers.md, "Key effects on
 * the domain object"): Shopify's webhook id and topic are not signed, so one order can reach
 * this handler as two events (a captured body replayed under a new id or another topic, or a
 * second subscription). The charge, the receipt and the shipment send the order's keys (the same
 * for every event about the order), and the order is recorded as paid only if this charge is
 * not already recorded on it: the order is charged, credited and shipped once.
 */
import { defineHandler } from '@oncehook/sdk';
import { z } from 'zod';
import type { ShopClients } from './clients.js';
import { orderLock, readOrder, receiptAndShip, recordPayment, type OrderFacts } from './orders.js';

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
      const charge = await ctx.step(
        'charge',
        async ({ idempotencyKey, signal }) => {
          const made = await clients.payment.charge(
            { customer: order.customerId, amount: order.totalCents, currency: order.currency, description: `Order ${order.orderId}` },
            idempotencyKey,
            signal,
          );
          return { id: made.id };
        },
        { key: order.orderId },
      );
      const recorded = await ctx.transaction('record-order', async (tx) => {
        // The payment API answered this order's key with the charge already made: another event
        // about this order recorded it. Nothing to credit again.
        await ctx.lock(orderLock(order.orderId));
        if ((await readOrder(tx, order)).chargeId === charge.id) return { becamePaid: false, alreadyRecorded: true };
        return { becamePaid: (await recordPayment(tx, order, order.totalCents, charge.id)).becamePaid, alreadyRecorded: false };
      });
      if (recorded.alreadyRecorded) {
        ctx.log.info({ orderId: order.orderId, chargeId: charge.id }, 'order already charged and recorded by another event; nothing more to do');
        await ctx.transaction('already-recorded', async () => ({ orderId: order.orderId, chargeId: charge.id }), { final: true });
        return;
      }
      await receiptAndShip(ctx, clients, order, order.totalCents, recorded.becamePaid, { keyOn: order.orderId });
    },
  );
}
