/** Coinbase Commerce: how it signs and what it sends (https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks-security). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const coinbaseCommerce: TableSender = {
  scheme: {
    kind: 'coinbase-commerce',
    title: 'Coinbase Commerce',
    env: 'COINBASE_COMMERCE_WEBHOOK_SECRET',
    secretName: 'shared secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-CC-Webhook-Signature', encoding: 'hex', signed: ['body'] },
    id: { field: 'event.id' },
    type: { field: 'event.type' },
    signedAt: { field: 'event.created_at', unit: 'iso' },
    redelivery: DAY(3, 'Coinbase Commerce retries for up to 3 days'),
    dev: 'local-development-coinbase-secret',
    docs: 'https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks-security',
  },
  payloads: {
    'charge:confirmed': () => ({
      id: Math.floor(Math.random() * 1_000_000),
      scheduled_for: iso(),
      event: {
        id: randomUUID(),
        resource: 'event',
        type: 'charge:confirmed',
        api_version: '2018-03-22',
        created_at: iso(),
        data: { code: hex(4).toUpperCase(), name: 'Order 42' },
      },
    }),
  },
};
