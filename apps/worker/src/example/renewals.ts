/**
 * A renewal from a Standard Webhooks billing sender (`subscription.renewed`): charge the
 * customer through the payment API, then record the charge in the ledger (completing the
 * event). Registered for the `standard-webhooks` kind, so any such source can send it.
 */
import { PermanentError, type EffectClients } from '@oncehook/shared';
import type { HandlerRegistry } from '../handlers';
import { creditLedger } from './orders';

interface RenewalEvent {
  data?: { subscription_id?: unknown; customer_id?: unknown; amount?: unknown; currency?: unknown };
}

export function registerRenewalHandlers(registry: HandlerRegistry, clients: EffectClients): void {
  registry.on<RenewalEvent>('standard-webhooks', 'subscription.renewed', async (event, ctx) => {
    const data = event.payload.data;
    const { subscription_id: subscription, customer_id: customer, amount, currency } = data ?? {};
    if (typeof subscription !== 'string' || typeof customer !== 'string' || !Number.isSafeInteger(amount) || typeof currency !== 'string') {
      throw new PermanentError('subscription.renewed needs data.subscription_id, customer_id, an integer amount and currency');
    }
    const charge = await ctx.step('charge', ({ idempotencyKey, signal }) =>
      clients.payment.charge({ customer, amount: amount as number, currency, description: `Renewal of ${subscription}` }, idempotencyKey, signal),
    );
    await ctx.transaction(
      'record-renewal',
      async (tx) => ({ chargeId: charge.id, entryId: await creditLedger(tx, customer, amount as number, currency, `renewal:${subscription}:${event.eventId}`) }),
      { completesEvent: true },
    );
  });
}
