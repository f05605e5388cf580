// src/webhooks/refunds.ts
/**
 * One handler: every refunded Stripe charge is recorded in our table and announced to our
 * notification API exactly once, however often Stripe delivers the event.
 *
 * - `ctx.transaction` is a local step: its SQL commits together with the step's record, so a
 *   retry after a crash finds it done and does not insert again.
 * - `ctx.step` is an external step: the call gets an idempotency key that is the same on every
 *   retry of this event, so our API can drop a repeat; its result is recorded once it returns.
 * - A 4xx from our API (`createOutboundClient`) is a PermanentError: the run is dead-lettered at
 *   once instead of being retried (a 5xx or a timeout is retried with backoff).
 */
import { createOutboundClient, defineHandler, readSettings } from '@oncehook/sdk';
// Stripe's event types for `source: 'stripe'` (needs the `stripe` package's types installed).
import '@oncehook/sdk/stripe';
import { z } from 'zod';

// This module's own settings, checked when the worker starts (a missing URL stops it there).
const settings = readSettings({ NOTIFY_API_URL: z.string().url() });
const notifications = createOutboundClient({ name: 'notify', baseUrl: settings.NOTIFY_API_URL, maxTries: 2, baseDelayMs: 10 });

export default defineHandler({ name: 'refunds', source: 'stripe', type: 'charge.refunded' }, async (event, ctx) => {
  const charge = event.payload.data.object;
  const refunded: number = charge.amount_refunded;
  await ctx.transaction('record-refund', async (tx) => {
    await tx.query('INSERT INTO refunds (charge_id, amount_refunded) VALUES ($1, $2) ON CONFLICT (charge_id) DO NOTHING', [charge.id, refunded]);
    return { charge: charge.id };
  });
  const sent = await ctx.step('notify', async ({ idempotencyKey }) => {
    const response = await notifications.request<{ id: string }>({ method: 'POST', path: '/notifications', body: { charge: charge.id }, idempotencyKey });
    return { notification: response.body.id };
  });
  await ctx.transaction(
    'remember',
    async (tx) => {
      await tx.query('UPDATE refunds SET notification = $2 WHERE charge_id = $1', [charge.id, sent.notification]);
      return { done: true };
    },
    { final: true },
  );
});
