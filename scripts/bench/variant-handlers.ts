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
 * with the external step `final`. BENCH_VARIANT=flow: `bench.topup-limited`, the chaos run's
 * limited handler on the top-ups: `concurrency: 2` (a limit it always reaches), an external step
 * that holds its slot for 30 ms (BENCH_FLOW_CALL_MS; a timer, not a network), then a final local
 * step: what share of its slots' capacity a limited handler gets (bench:backlog prints it).
 */
import { setTimeout as sleep } from 'node:timers/promises';
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

/** The flow variant's limit and call time (bench-backlog.ts reads the same two). */
export const FLOW_SLOTS = 2;
export const FLOW_CALL_MS = Number(process.env.BENCH_FLOW_CALL_MS ?? '30');

const limitedCall = defineHandler(
  { name: 'bench.topup-limited', source: 'stripe', type: 'payment_intent.succeeded', concurrency: FLOW_SLOTS, description: 'bench: a limited handler that reaches its limit' },
  async (event, ctx) => {
    await ctx.step('work', async () => {
      await sleep(FLOW_CALL_MS);
      return { worked: true };
    });
    await ctx.transaction('record', async (tx) => ({ recorded: (await tx.query<{ id: string }>('SELECT $1::text AS id', [event.eventId])).rows[0]?.id }), { final: true });
  },
);

export default variant === 'external' || variant === 'external-final' ? [notify] : variant === 'flow' ? [limitedCall] : [audit];
