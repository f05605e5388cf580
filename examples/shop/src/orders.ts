/**
 * Orders, shared by the Stripe and Shopify flows.
 *
 * Concurrency choice: SERIALIZE PER OBJECT. Every write to an order happens in a local step
 * that first takes `ctx.lock('order:<id>')` (the SDK's per-object lock, a transaction-scoped
 * advisory lock), so two events about the same order (two partial payments arriving at the
 * same moment, handled by two workers) run their read-modify-write one after the other and
 * neither update is lost. The lock is held only for the local transaction, never across an
 * external call. (`SELECT ... FOR UPDATE` on the row would do too once the row exists; the
 * lock also covers the first payment, which creates it.)
 */
import type { HandlerContext, PoolClient } from '@oncehook/sdk';
import type { ShopClients } from './clients.js';

export interface OrderFacts {
  orderId: string;
  customerId: string;
  email: string;
  currency: string;
  totalCents: number;
  address: string;
  items: { sku: string; quantity: number }[];
}

/** The lock key of an order (ctx.lock): every local step that writes the order takes it first. */
export const orderLock = (orderId: string) => `order:${orderId}`;

/** Creates the order if new and reads it; the caller holds ctx.lock(orderLock(id)). */
export async function readOrder(tx: PoolClient, order: OrderFacts): Promise<{ paidCents: number; totalCents: number; status: 'pending' | 'paid'; chargeId: string | null }> {
  await tx.query(
    `INSERT INTO example_orders (id, customer_id, email, currency, total_cents)
     VALUES ($1::text, $2::text, $3::text, $4::text, $5::bigint)
     ON CONFLICT (id) DO NOTHING`,
    [order.orderId, order.customerId, order.email, order.currency, order.totalCents],
  );
  const { rows } = await tx.query<{ paidCents: number; totalCents: number; status: 'pending' | 'paid'; chargeId: string | null }>(
    `SELECT paid_cents::int AS "paidCents", total_cents::int AS "totalCents", status, charge_id AS "chargeId"
       FROM example_orders WHERE id = $1::text`,
    [order.orderId],
  );
  const row = rows[0];
  if (!row) throw new Error(`order ${order.orderId} vanished`);
  return row;
}

/** Records a payment on an order whose lock the caller holds; says whether this payment completed it. */
export async function recordPayment(tx: PoolClient, order: OrderFacts, amountCents: number, chargeId: string | null): Promise<{ becamePaid: boolean; paidCents: number }> {
  const current = await readOrder(tx, order);
  // Read-modify-write, safe because the caller holds the order's lock (see the header).
  const paidCents = current.paidCents + amountCents;
  const becamePaid = current.status === 'pending' && paidCents >= current.totalCents;
  await tx.query(
    `UPDATE example_orders
        SET paid_cents = $2::bigint, payments = payments + 1, status = $3::text,
            charge_id = coalesce($4::text, charge_id), updated_at = now()
      WHERE id = $1::text`,
    [order.orderId, paidCents, becamePaid ? 'paid' : current.status, chargeId],
  );
  await creditLedger(tx, order.customerId, amountCents, order.currency, order.orderId);
  return { becamePaid, paidCents };
}

export async function creditLedger(tx: PoolClient, accountId: string, amountCents: number, currency: string, source: string): Promise<number | null> {
  await tx.query('INSERT INTO ledger_accounts (id, balance_cents) VALUES ($1::text, 0) ON CONFLICT (id) DO NOTHING', [accountId]);
  await tx.query('UPDATE ledger_accounts SET balance_cents = balance_cents + $2::bigint, updated_at = now() WHERE id = $1::text', [accountId, amountCents]);
  const { rows } = await tx.query<{ id: number }>(
    `INSERT INTO ledger_entries (account_id, amount_cents, currency, source_provider, source_event_id)
     VALUES ($1::text, $2::bigint, $3::text, 'example', $4::text) RETURNING id`,
    [accountId, amountCents, currency, source],
  );
  return rows[0]?.id ?? null;
}

/**
 * The tail of every paid-order flow: a receipt for this payment (email, deduped on the step's
 * key), a shipment if this payment completed the order (fulfilment, Idempotency-Key), then the
 * final local step that records both and marks the run done in one transaction.
 *
 * Whether to ship is decided by `becamePaid`, the RECORDED result of the earlier local step,
 * so a resumed attempt (or a replay) takes the same path as the first.
 */
export async function receiptAndShip(
  ctx: HandlerContext,
  clients: ShopClients,
  order: OrderFacts,
  amountCents: number,
  becamePaid: boolean,
  options: { keyOn?: string } = {},
): Promise<void> {
  // `keyOn`: the receipt is keyed on the domain object when one event per object is the rule
  // (a Shopify order); a Stripe order takes several payments, one receipt each (the event's key).
  const keyed = options.keyOn === undefined ? {} : { key: options.keyOn };
  const receipt = await ctx.step(
    'send-receipt',
    async ({ idempotencyKey, signal }) => {
      const sent = await clients.email.send(
        { to: order.email, subject: `Receipt for order ${order.orderId}`, text: `We received ${(amountCents / 100).toFixed(2)} ${order.currency.toUpperCase()}.` },
        idempotencyKey,
        signal,
      );
      return { id: sent.id };
    },
    keyed,
  );
  // One shipment per order, whichever event completed it: keyed on the order.
  const shipment = becamePaid
    ? await ctx.step(
        'request-shipment',
        async ({ idempotencyKey, signal }) => {
          const requested = await clients.fulfilment.requestShipment({ orderId: order.orderId, address: order.address, items: order.items }, idempotencyKey, signal);
          return { id: requested.id };
        },
        { key: order.orderId },
      )
    : null;
  await ctx.transaction(
    'record-fulfilment',
    async (tx) => {
      await tx.query(
        `UPDATE example_orders
            SET receipt_ids = array_append(receipt_ids, $2::text), shipment_id = coalesce($3::text, shipment_id), updated_at = now()
          WHERE id = $1::text`,
        [order.orderId, receipt.id, shipment?.id ?? null],
      );
      return { receiptId: receipt.id, shipmentId: shipment?.id ?? null };
    },
    { final: true },
  );
}
