/**
 * The SDK's types, checked by the compiler (`npm test` runs tsc over this file before vitest):
 * payloads typed from the providers' own types, typos that do not compile, step results that
 * must be plain JSON. Each `@ts-expect-error` line must be an error, or tsc fails. (That a
 * project with only one provider's package type-checks is the user-project test's to show.)
 */
import { defineHandler, type HandlerContext } from '@oncehook/sdk';
// The providers' types are opt-in (each needs its provider's package): these two register them.
import '@oncehook/sdk/github';
import '@oncehook/sdk/linear';
import type { StripeEvent } from '@oncehook/sdk/stripe';
import type Stripe from 'stripe';
import { expectTypeOf, it } from 'vitest';
import { z } from 'zod';

it('Stripe payloads are typed by event type', () => {
  defineHandler({ name: 'refunds', source: 'stripe', type: 'charge.refunded' }, async (event) => {
    expectTypeOf(event.payload).toEqualTypeOf<Stripe.ChargeRefundedEvent>();
    expectTypeOf(event.payload.data.object.amount_refunded).toBeNumber();
    expectTypeOf(event.payload.data.object).toEqualTypeOf<Stripe.Charge>();
  });
  // A named source of the Stripe kind.
  defineHandler({ name: 'eu-invoices', source: 'stripe-eu', kind: 'stripe', type: 'invoice.paid' }, async (event) => {
    expectTypeOf(event.payload).toEqualTypeOf<StripeEvent<'invoice.paid'>>();
  });
});

it('a misspelled Stripe or GitHub type does not compile', () => {
  // @ts-expect-error 'charge.refundd' is not a Stripe event type
  defineHandler({ name: 'typo', source: 'stripe', type: 'charge.refundd' }, async () => {});
  // @ts-expect-error 'pushh' is not a GitHub event
  defineHandler({ name: 'typo-gh', source: 'github', type: 'pushh' }, async () => {});
});

it('GitHub payloads are typed by event and action', () => {
  defineHandler({ name: 'pushes', source: 'github', type: 'push' }, async (event) => {
    expectTypeOf(event.payload.ref).toBeString();
    expectTypeOf(event.payload.commits[0]!.message).toBeString();
  });
  defineHandler({ name: 'new-issues', source: 'github', type: 'issues.opened' }, async (event) => {
    expectTypeOf(event.payload.action).toEqualTypeOf<'opened'>();
    expectTypeOf(event.payload.issue.title).toBeString();
  });
});

it('Linear payloads are typed by <type>.<action>; an unknown Linear type does not compile', () => {
  defineHandler({ name: 'linear-issues', source: 'linear', type: 'Issue.create' }, async (event) => {
    expectTypeOf(event.payload.type).toEqualTypeOf<'Issue'>();
    expectTypeOf(event.payload.data.title).toBeString();
  });
  // @ts-expect-error 'Isue' is not a Linear webhook type
  defineHandler({ name: 'linear-typo', source: 'linear', type: 'Isue.create' }, async () => {});
});

it('a payload schema types the payload of any kind (and admits any type name)', () => {
  const Renewal = z.object({ data: z.object({ amount: z.number(), currency: z.string() }) });
  defineHandler({ name: 'renewals', source: 'standard-webhooks', type: 'subscription.renewed', payload: Renewal }, async (event) => {
    expectTypeOf(event.payload).toEqualTypeOf<z.output<typeof Renewal>>();
  });
  defineHandler({ name: 'shopify', source: 'shopify', type: 'orders/create' }, async (event) => {
    expectTypeOf(event.payload).toBeUnknown();
  });
  defineHandler({ name: 'brand-new-stripe-type', source: 'stripe', type: 'v3.thing.happened', payload: z.object({ id: z.string() }) }, async () => {});
});

it('step results must be plain JSON; interfaces and optional fields are fine', () => {
  const handler = async (ctx: HandlerContext) => {
    interface Charge {
      id: string;
      amount: number;
      note?: string;
    }
    const charge: Charge = { id: 'ch', amount: 1 };
    expectTypeOf(await ctx.step('charge', async () => charge)).toEqualTypeOf<Charge>();
    // Literal values keep their literal types: exactly what was recorded.
    expectTypeOf(await ctx.transaction('t', async (tx) => ({ nested: { ok: true, at: null }, rows: (await tx.query('SELECT 1')).rowCount }))).toEqualTypeOf<{
      nested: { ok: true; at: null };
      rows: number | null;
    }>();
    const status = await ctx.step('status', async ({ attempt }) => ({ status: attempt > 1 ? 'late' : 'on time' }));
    expectTypeOf(status.status).toEqualTypeOf<'late' | 'on time'>();
    expectTypeOf(await ctx.transaction('nothing', async () => {})).toEqualTypeOf<void>();
    // @ts-expect-error a Date is not JSON (it would come back a string on a resumed attempt)
    await ctx.step('date', async ({ idempotencyKey }) => ({ at: new Date(), idempotencyKey }));
    // @ts-expect-error a Map is not JSON (it would come back {})
    await ctx.transaction('map', async () => new Map<string, number>());
    // @ts-expect-error a bigint is not JSON
    await ctx.step('big', async () => ({ n: 10n }));
    // @ts-expect-error a Response (a class with methods) is not JSON
    await ctx.step('response', async () => new Response('x'));
  };
  expectTypeOf(handler).toBeFunction();
});
