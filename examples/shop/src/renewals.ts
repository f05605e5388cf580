/**
 * A renewal from a Standard Webhooks billing sender (`subscription.renewed`): charge the
 * customer through the payment API, then record the charge in the ledger (the final step).
 * Registered for the `standard-webhooks` kind, so any such source can send it. The payload
 * has no published types, so a zod schema describes it: it types `event.payload` and is
 * checked before the handler runs (a mismatch fails the run, naming the field).
 */
import { defineHandler } from '@oncehook/sdk';
import { z } from 'zod';
import type { ShopClients } from './clients.js';
import { creditLedger } from './orders.js';

const RenewalPayload = z.object({
  type: z.literal('subscription.renewed'),
  data: z.object({
    subscription_id: z.string().min(1),
    customer_id: z.string().min(1),
    amount: z.number().int().positive(),
    currency: z.string().length(3),
  }),
});

export function renewalHandler(clients: ShopClients) {
  return defineHandler(
    { name: 'shop.renewals', source: 'standard-webhooks', type: 'subscription.renewed', payload: RenewalPayload, description: 'charge a renewal, record it in the ledger' },
    async (event, ctx) => {
      const { subscription_id: subscription, customer_id: customer, amount, currency } = event.payload.data;
      const charge = await ctx.step('charge', async ({ idempotencyKey, signal }) => {
        const made = await clients.payment.charge({ customer, amount, currency, description: `Renewal of ${subscription}` }, idempotencyKey, signal);
        return { id: made.id };
      });
      await ctx.transaction(
        'record-renewal',
        async (tx) => ({ chargeId: charge.id, entryId: await creditLedger(tx, customer, amount, currency, `renewal:${subscription}:${event.eventId}`) }),
        { final: true },
      );
    },
  );
}
