/** Lemon Squeezy: how it signs and what it sends (https://docs.lemonsqueezy.com/help/webhooks/signing-requests). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, type TableSender } from './sender-kit.js';

export const lemonsqueezy: TableSender = {
  scheme: {
    kind: 'lemonsqueezy',
    title: 'Lemon Squeezy',
    env: 'LEMONSQUEEZY_WEBHOOK_SECRET',
    secretName: 'signing secret',
    key: 'text',
    minSecretLength: 6,
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Signature', encoding: 'hex', signed: ['body'] },
    id: { bodyHash: true },
    type: { field: 'meta.event_name' },
    redelivery: DAY(1, 'Lemon Squeezy retries 3 times with exponential backoff'),
    dev: 'local-development-lemonsqueezy-secret',
    docs: 'https://docs.lemonsqueezy.com/help/webhooks/signing-requests',
  },
  payloads: {
    order_created: () => ({
      meta: { event_name: 'order_created', custom_data: { customer_id: 25 } },
      data: { type: 'orders', id: String(Date.now()), attributes: { store_id: 1, identifier: randomUUID(), total: 999, currency: 'USD', status: 'paid', created_at: iso() } },
    }),
  },
};
