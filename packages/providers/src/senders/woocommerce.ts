/** WooCommerce: how it signs and what it sends (https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks). */
import { iso, type TableSender } from './sender-kit.js';

export const woocommerce: TableSender = {
  scheme: {
    kind: 'woocommerce',
    title: 'WooCommerce',
    env: 'WOOCOMMERCE_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    minSecretLength: 8,
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-WC-Webhook-Signature', encoding: 'base64', signed: ['body'] },
    id: { header: 'X-WC-Webhook-Delivery-ID' },
    type: { header: 'X-WC-Webhook-Topic' },
    redelivery: null,
    dev: 'local-development-woocommerce-secret',
    docs: 'https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks',
  },
  payloads: {
    'order.created': () => ({
      id: Math.floor(Math.random() * 100_000),
      status: 'processing',
      currency: 'USD',
      total: '29.35',
      date_created: iso().slice(0, 19),
      billing: { first_name: 'Jenny', last_name: 'Rosen', email: 'jenny@example.com' },
      line_items: [{ id: 315, name: 'Woo Single #1', quantity: 2, total: '6.00' }],
    }),
  },
};
