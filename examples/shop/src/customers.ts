/**
 * Stripe `customer.updated`, the out-of-order example. Stripe does not guarantee delivery
 * order, so an older update can arrive after a newer one. Each event carries its signed
 * creation time (`created`); the profile keeps the creation time of the update it reflects and
 * takes an update only if it is newer. A stale one is recorded as ignored, not applied.
 *
 * The check and the write are one statement (a conditional upsert), so two updates racing for
 * the same customer cannot both win: the row lock taken by ON CONFLICT orders them.
 */
import { defineHandler, PermanentError } from '@oncehook/sdk';

export const customerProfileHandler = defineHandler(
  { name: 'shop.customer-profiles', source: 'stripe', type: 'customer.updated', description: 'keep the newest customer profile' },
  async (event, ctx) => {
    const customer = event.payload.data.object;
    if (event.signedAt === null) throw new PermanentError('customer.updated needs a signed created time');
    const signedAt = event.signedAt;
    await ctx.transaction(
      'apply-profile',
      async (tx) => {
        // 0 rows = the stored profile already reflects a newer (or the same) update: stale.
        const { rowCount } = await tx.query(
          `INSERT INTO example_customers (id, email, name, version_at)
           VALUES ($1::text, $2::text, $3::text, $4::timestamptz)
           ON CONFLICT (id) DO UPDATE
              SET email = excluded.email, name = excluded.name, version_at = excluded.version_at, updated_at = now()
            WHERE example_customers.version_at < excluded.version_at`,
          [customer.id, customer.email ?? null, customer.name ?? null, signedAt],
        );
        const applied = rowCount === 1;
        if (!applied) ctx.log.info({ customer: customer.id }, 'stale customer.updated ignored (the profile reflects a newer event)');
        return { applied };
      },
      { final: true },
    );
  },
);
