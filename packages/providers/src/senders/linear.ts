/** Linear: how it signs and what it sends (https://linear.app/developers/webhooks). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, type TableSender } from './sender-kit.js';

export const linear: TableSender = {
  scheme: {
    kind: 'linear',
    title: 'Linear',
    env: 'LINEAR_WEBHOOK_SECRET',
    secretName: 'webhook signing secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'Linear-Signature', encoding: 'hex', signed: ['body'] },
    // Linear puts the send time in the signed body (`webhookTimestamp`, ms) and asks for 60 s.
    timestamp: { from: { field: 'webhookTimestamp' }, unit: 'ms', toleranceSeconds: 60 },
    id: { header: 'Linear-Delivery' },
    type: { field: ['type', 'action'] },
    signedAt: { field: 'createdAt', unit: 'iso' },
    redelivery: DAY(1, 'Linear retries 3 times, the last 6 hours after the first attempt'),
    dev: 'local-development-linear-secret',
    docs: 'https://linear.app/developers/webhooks',
  },
  payloads: {
    'Issue.create': () => ({
      action: 'create',
      type: 'Issue',
      createdAt: iso(),
      organizationId: randomUUID(),
      url: 'https://linear.app/acme/issue/ENG-42/checkout-charges-twice',
      webhookId: randomUUID(),
      data: { id: randomUUID(), identifier: 'ENG-42', title: 'Checkout charges twice', priority: 1, teamId: randomUUID(), createdAt: iso() },
    }),
  },
};
