/** Square: how it signs and what it sends (https://developer.squareup.com/docs/webhooks/step3validate). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const square: TableSender = {
  scheme: {
    kind: 'square',
    title: 'Square',
    env: 'SQUARE_SIGNATURE_KEY',
    secretName: 'signature key',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'x-square-hmacsha256-signature', encoding: 'base64', signed: ['url', 'body'] },
    id: { field: 'event_id' },
    type: { field: 'type' },
    signedAt: { field: 'created_at', unit: 'iso' },
    redelivery: DAY(1, 'Square retries for up to 24 hours'),
    dev: 'local-development-square-key',
    docs: 'https://developer.squareup.com/docs/webhooks/step3validate',
  },
  payloads: {
    'payment.created': () => ({
      merchant_id: 'ML8M1AQ1GQG2K',
      type: 'payment.created',
      event_id: randomUUID(),
      created_at: iso(),
      data: { type: 'payment', id: `KkAkhdMs${hex(8)}`, object: { payment: { id: `KkAkhdMs${hex(8)}`, amount_money: { amount: 2000, currency: 'USD' }, status: 'APPROVED' } } },
    }),
  },
};
