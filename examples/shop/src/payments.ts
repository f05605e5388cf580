/**
 * Stripe `payment_intent.succeeded`.
 *
 * - With `metadata.order_id`: a payment towards an order (possibly partial). Record it on the
 *   order and credit the ledger (local step, serialized per order), email a receipt, request
 *   shipment if this payment completed the order, record both (the final step).
 * - Without: a wallet top-up. One local step credits the account ledger and completes the
 *   run: entry, balance, step record and `done` commit together. The account is
 *   `metadata.account_id`, else the Stripe customer, else `guest` (Stripe CLI's own
 *   `stripe trigger payment_intent.succeeded` fixture has no customer).
 *
 * Either way the customer is credited once, however many times the event is delivered, however
 * many workers race for it, and wherever a worker is killed.
 */
import { defineHandler, PermanentError } from '@oncehook/sdk';
// Stripe's event types for the handlers below (the example depends on the stripe package).
import '@oncehook/sdk/stripe';
import type { ShopClients } from './clients.js';
import { creditLedger, orderLock, receiptAndShip, recordPayment, type OrderFacts } from './orders.js';

/** Where a payment without a customer is credited. */
export const GUEST_ACCOUNT = 'guest';

export function paymentHandler(clients: ShopClients) {
  return defineHandler(
    { name: 'shop.payments', source: 'stripe', type: 'payment_intent.succeeded', description: 'credit the ledger; pay, receipt and ship orders' },
    async (event, ctx) => {
      const intent = event.payload.data.object;
      const metadata = intent.metadata ?? {};
      const customer = typeof intent.customer === 'string' ? intent.customer : intent.customer?.id;
      const accountId = metadata.account_id ?? customer ?? GUEST_ACCOUNT;
      const amountCents = intent.amount_received ?? intent.amount;
      if (!Number.isSafeInteger(amountCents) || typeof intent.currency !== 'string') {
        // Retrying cannot fix the payload: dead-letter it for a human.
        throw new PermanentError('payment_intent.succeeded needs an integer amount_received (or amount) and a currency');
      }
      const orderId = metadata.order_id;
      if (orderId === undefined) {
        await ctx.transaction(
          'credit-ledger',
          async (tx) => ({ entryId: await creditLedger(tx, accountId, amountCents, intent.currency, event.eventId), accountId, amount: amountCents }),
          { final: true },
        );
        return;
      }

      const total = Number(metadata.order_total ?? amountCents);
      const email = intent.receipt_email;
      if (!Number.isSafeInteger(total) || typeof email !== 'string') {
        throw new PermanentError('an order payment needs metadata.order_total (integer cents) and receipt_email');
      }
      const order: OrderFacts = {
        orderId,
        customerId: accountId,
        email,
        currency: intent.currency,
        totalCents: total,
        address: metadata.address ?? 'address on file',
        items: [{ sku: metadata.sku ?? 'sku-default', quantity: 1 }],
      };
      const { becamePaid } = await ctx.transaction('record-payment', async (tx) => {
        await ctx.lock(orderLock(orderId));
        return recordPayment(tx, order, amountCents, intent.id);
      });
      await receiptAndShip(ctx, clients, order, amountCents, becamePaid);
    },
  );
}
