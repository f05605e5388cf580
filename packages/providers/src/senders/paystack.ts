/** Paystack: how it signs and what it sends (https://paystack.com/docs/payments/webhooks/). */
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const paystack: TableSender = {
  scheme: {
    kind: 'paystack',
    title: 'Paystack',
    env: 'PAYSTACK_SECRET_KEY',
    secretName: 'secret key',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha512', header: 'x-paystack-signature', encoding: 'hex', signed: ['body'] },
    id: { bodyHash: true },
    type: { field: 'event' },
    redelivery: DAY(3, 'Paystack retries every 3 minutes at first, then hourly for 72 hours'),
    dev: 'sk_test_local_development_paystack',
    docs: 'https://paystack.com/docs/payments/webhooks/',
  },
  payloads: {
    'charge.success': () => ({
      event: 'charge.success',
      data: {
        id: Math.floor(Math.random() * 1e9),
        domain: 'test',
        status: 'success',
        reference: hex(6),
        amount: 50000,
        currency: 'NGN',
        paid_at: iso(),
        customer: { email: 'jenny@example.com' },
      },
    }),
  },
};
