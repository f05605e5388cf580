/**
 * Stripe `customer.updated`, the out-of-order example. Stripe does not guarantee delivery
 * order, so an older update can arrive after a newer one. Each event carries its signed
 * creation time (`created`); the profile keeps the creation time of the update it reflects and
 * takes an update only if it is newer. A stale one is recorded as ignored, not applied.
 *
 * The check and the write are one statement (a conditional upsert), so two updates racing for
 * the same customer cannot both win: the row lock taken by ON CONFLICT orders them.
 */
import { PermanentError } from '@oncehook/shared';
import type { HandlerRegistry } from '../handlers';

interface CustomerEvent {
  data?: { object?: { id?: unknown; email?: unknown; name?: unknown } };
}

export function registerCustomerHandlers(registry: HandlerRegistry): void {
  registry.on<CustomerEvent>('stripe', 'customer.updated', async (event, ctx) => {
    const customer = event.payload.data?.object;
    if (typeof customer?.id !== 'string' || event.signedAt === null) {
      throw new PermanentError('customer.updated needs data.object.id and a signed created time');
    }
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
          [customer.id, typeof customer.email === 'string' ? customer.email : null, typeof customer.name === 'string' ? customer.name : null, event.signedAt],
        );
        const applied = rowCount === 1;
        if (!applied) ctx.log.info({ customer: customer.id }, 'stale customer.updated ignored (the profile reflects a newer event)');
        return { applied };
      },
      { completesEvent: true },
    );
  });
}
