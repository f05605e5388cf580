/** Razorpay: how it signs and what it sends (https://razorpay.com/docs/webhooks/validate-test/). */
import { DAY, now, hex, type TableSender } from './sender-kit.js';

export const razorpay: TableSender = {
  scheme: {
    kind: 'razorpay',
    title: 'Razorpay',
    env: 'RAZORPAY_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    minSecretLength: 8,
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Razorpay-Signature', encoding: 'hex', signed: ['body'] },
    id: { header: 'x-razorpay-event-id' },
    type: { field: 'event' },
    signedAt: { field: 'created_at', unit: 's' },
    redelivery: DAY(1, 'Razorpay retries for 24 hours'),
    dev: 'local-development-razorpay-secret',
    docs: 'https://razorpay.com/docs/webhooks/validate-test/',
  },
  payloads: {
    'payment.captured': () => ({
      entity: 'event',
      account_id: `acc_${hex(7)}`,
      event: 'payment.captured',
      contains: ['payment'],
      created_at: now(),
      payload: { payment: { entity: { id: `pay_${hex(7)}`, amount: 50000, currency: 'INR', status: 'captured', email: 'jenny@example.com' } } },
    }),
  },
};
