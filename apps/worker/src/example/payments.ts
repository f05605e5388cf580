/**
 * Stripe `payment_intent.succeeded`.
 *
 * - With `metadata.order_id`: a payment towards an order (possibly partial). Record it on the
 *   order and credit the ledger (local step, serialized per order), email a receipt, request
 *   shipment if this payment completed the order, record both (completing the event).
 * - Without: a wallet top-up. One local step credits the account ledger and completes the
 *   event: entry, balance, step record and `done` commit together.
 *
 * Either way the customer is credited once, however many times the event is delivered, however
 * many workers race for it, and wherever a worker is killed.
 */
import { PermanentError, type EffectClients } from '@oncehook/shared';
import type { HandlerRegistry } from '../handlers';
import { creditLedger, receiptAndShip, recordPayment, type OrderFacts } from './orders';

interface PaymentIntentEvent {
  data?: {
    object?: {
      id?: unknown;
      amount_received?: unknown;
      amount?: unknown;
      currency?: unknown;
      customer?: unknown;
      receipt_email?: unknown;
      metadata?: { account_id?: unknown; order_id?: unknown; order_total?: unknown; address?: unknown; sku?: unknown };
    };
  };
}

export function registerPaymentHandlers(registry: HandlerRegistry, clients: EffectClients): void {
  registry.on<PaymentIntentEvent>('stripe', 'payment_intent.succeeded', async (event, ctx) => {
    const intent = event.payload.data?.object;
    const accountId = intent?.metadata?.account_id ?? intent?.customer;
    const amount = intent?.amount_received ?? intent?.amount;
    const currency = intent?.currency;
    if (typeof accountId !== 'string' || !Number.isSafeInteger(amount) || typeof currency !== 'string') {
      // Retrying cannot fix the payload: dead-letter it for a human.
      throw new PermanentError('payment_intent.succeeded needs data.object.customer (or metadata.account_id), an integer amount_received and a currency');
    }
    const amountCents = amount as number;
    const orderId = intent?.metadata?.order_id;

    if (typeof orderId !== 'string') {
      await ctx.transaction(
        'credit-ledger',
        async (tx) => ({ entryId: await creditLedger(tx, accountId, amountCents, currency, event.eventId), accountId, amount: amountCents }),
        { completesEvent: true },
      );
      return;
    }

    const total = Number(intent?.metadata?.order_total ?? amountCents);
    const email = intent?.receipt_email;
    if (!Number.isSafeInteger(total) || typeof email !== 'string') {
      throw new PermanentError('an order payment needs metadata.order_total (integer cents) and receipt_email');
    }
    const order: OrderFacts = {
      orderId,
      customerId: accountId,
      email,
      currency,
      totalCents: total,
      address: typeof intent?.metadata?.address === 'string' ? intent.metadata.address : 'address on file',
      items: [{ sku: typeof intent?.metadata?.sku === 'string' ? intent.metadata.sku : 'sku-default', quantity: 1 }],
    };
    const { becamePaid } = await ctx.transaction('record-payment', (tx) => recordPayment(tx, order, amountCents, typeof intent?.id === 'string' ? intent.id : null));
    await receiptAndShip(ctx, clients, order, amountCents, becamePaid);
  });
}
