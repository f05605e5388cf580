/**
 * One more handler on the bench's top-ups, for `npm run bench -- --variants ...` only (never
 * deployed): what one more handler, and one flow limit, cost per event.
 *
 * BENCH_VARIANT=fanout: `bench.topup-audit` on Stripe `payment_intent.succeeded` beside the shop's
 * top-up, one final local step (one statement); BENCH_VARIANT=limited: the same handler with
 * `concurrency: 64`, a fleet-wide limit the bench never reaches, so the row measures what
 * flow control's bookkeeping costs, not waiting.
 */
import { defineHandler } from '@oncehook/sdk';

const limited = process.env.BENCH_VARIANT === 'limited';

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

export default [audit];
