/**
 * One more handler on the bench's top-ups, for `npm run bench -- --variants ...` only (never
 * deployed): what one more handler, and one flow limit, cost per event.
 *
 * BENCH_VARIANT=fanout: `bench.topup-audit` on Stripe `payment_intent.succeeded` beside the shop's
 * top-up, one final local step (one statement); BENCH_VARIANT=limited: the same handler with
 * `concurrency: 64`, a fleet-wide limit the bench never reaches, so the row measures what
 * flow control's bookkeeping costs, not waiting. BENCH_VARIANT=external: `bench.topup-notify`
 * instead, one local step then one external step (a keyed call that answers at once: the row
 * measures Oncehook's side of the call, not a network); BENCH_VARIANT=external-final: the same
 * with the external step `final`.
 */
import { defineHandler } from '@oncehook/sdk';

const variant = process.env.BENCH_VARIANT;
const limited = variant === 'limited';

const audit = defineHandler(
  {
    name: 'bench.topup-audit',
    source: 'stripe',
    type: 'payment_intent.succeeded',
    ...(limited ? { concurrency: 64 } : {}),
    description: 'bench: a second handler on the top-ups (one local step)',
  },
  async (event, ctx) => {
    await ctx.transaction('audit', async (tx) => ({ audited: (await tx.query<{ id: string }>('SELECT $1::text AS id', [event.eventId])).rows[0]?.id }), { final: true });
  },
);

const notify = defineHandler(
  { name: 'bench.topup-notify', source: 'stripe', type: 'payment_intent.succeeded', description: 'bench: one local and one external step on the top-ups' },
  async (event, ctx) => {
    await ctx.transaction('note', async (tx) => ({ noted: (await tx.query<{ id: string }>('SELECT $1::text AS id', [event.eventId])).rows[0]?.id }));
    await ctx.step('notify', async ({ idempotencyKey }) => ({ sent: idempotencyKey.length }), { final: variant === 'external-final' });
  },
);

export default variant === 'external' || variant === 'external-final' ? [notify] : [audit];
