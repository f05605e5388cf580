/**
 * The example domain: a Stripe `payment_intent.succeeded` credits an account ledger.
 *
 * The whole effect is one local step: the ledger entry, the balance update, the step record
 * and the `done` transition commit in one fenced transaction. However many times the event
 * is delivered, however many workers race for it, and wherever a worker is killed, the
 * account is credited once.
 */
import { PermanentError } from '@oncehook/shared';
import type { HandlerRegistry } from '../handlers';

interface PaymentIntentEvent {
  data?: { object?: { id?: unknown; amount_received?: unknown; amount?: unknown; currency?: unknown; customer?: unknown; metadata?: { account_id?: unknown } } };
}

export function registerLedgerExample(registry: HandlerRegistry): void {
  registry.on<PaymentIntentEvent>('stripe', 'payment_intent.succeeded', async (event, ctx) => {
    const intent = event.payload.data?.object;
    const accountId = intent?.metadata?.account_id ?? intent?.customer;
    const amount = intent?.amount_received ?? intent?.amount;
    const currency = intent?.currency;
    if (typeof accountId !== 'string' || !Number.isSafeInteger(amount) || typeof currency !== 'string') {
      // Retrying cannot fix the payload: dead-letter it for a human.
      throw new PermanentError('payment_intent.succeeded needs data.object.customer (or metadata.account_id), an integer amount_received and a currency');
    }
    await ctx.transaction(
      'credit-ledger',
      async (tx) => {
        await tx.query(
          `INSERT INTO ledger_accounts (id, balance_cents) VALUES ($1::text, 0) ON CONFLICT (id) DO NOTHING`,
          [accountId],
        );
        await tx.query(
          `UPDATE ledger_accounts SET balance_cents = balance_cents + $2::bigint, updated_at = now() WHERE id = $1::text`,
          [accountId, amount],
        );
        const { rows } = await tx.query<{ id: number }>(
          `INSERT INTO ledger_entries (account_id, amount_cents, currency, source_provider, source_event_id)
           VALUES ($1::text, $2::bigint, $3::text, $4::text, $5::text) RETURNING id`,
          [accountId, amount, currency, event.provider, event.eventId],
        );
        return { entryId: rows[0]?.id ?? null, accountId, amount };
      },
      { completesEvent: true },
    );
  });
}
