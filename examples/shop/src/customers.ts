/**
 * Stripe `customer.updated`, the out-of-order example. Stripe does not guarantee delivery
 * order, so an older update can arrive after a newer one. Each event carries its signed
 * creation time (`created`, `event.signedAt`): `ctx.ordered` records, per customer, the newest
 * version this handler applied, and says `stale` when a newer one was applied already. A stale
 * update writes nothing and its step records `{ applied: false, reason: 'stale' }`.
 *
 * `ctx.ordered` is one upsert inside the step's transaction: two updates racing for the same
 * customer on two workers cannot both win (its row lock orders them), and the version commits
 * or rolls back with the profile write.
 */
import { defineHandler, PermanentError } from '@oncehook/sdk';
// Stripe's event types for the handlers below (the example depends on the stripe package).
import '@oncehook/sdk/stripe';

export const customerProfileHandler = defineHandler(
  { name: 'shop.customer-profiles', source: 'stripe', type: 'customer.updated', description: 'keep the newest customer profile' },
  async (event, ctx) => {
    const customer = event.payload.data.object;
    if (event.signedAt === null) throw new PermanentError('customer.updated needs a signed created time');
    const signedAt = event.signedAt;
    await ctx.transaction(
      'apply-profile',
      async (tx) => {
        const { stale, previous } = await ctx.ordered(`customer:${customer.id}`, signedAt);
        if (stale) return { applied: false, reason: 'stale', newer: previous };
        await tx.query(
          `INSERT INTO example_customers (id, email, name, version_at)
           VALUES ($1::text, $2::text, $3::text, $4::timestamptz)
           ON CONFLICT (id) DO UPDATE
              SET email = excluded.email, name = excluded.name, version_at = excluded.version_at, updated_at = now()`,
          [customer.id, customer.email ?? null, customer.name ?? null, signedAt],
        );
        return { applied: true, reason: 'newest', newer: null };
      },
      { final: true },
    );
  },
);
