/** Postmark: how it signs and what it sends (https://postmarkapp.com/developer/webhooks/webhooks-overview). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, type TableSender } from './sender-kit.js';

export const postmark: TableSender = {
  scheme: {
    kind: 'postmark',
    title: 'Postmark',
    env: 'POSTMARK_WEBHOOK_CREDENTIALS',
    secretName: 'Basic auth credentials',
    key: 'text',
    // Postmark signs nothing: Basic credentials in the webhook URL are all it offers.
    signature: { family: 'basic' },
    id: { bodyHash: true },
    type: { field: 'RecordType' },
    redelivery: DAY(1, 'Postmark retries failed webhooks up to 10 times over about 6 hours'),
    dev: 'oncehook:local-development-postmark',
    docs: 'https://postmarkapp.com/developer/webhooks/webhooks-overview',
  },
  payloads: {
    Delivery: () => ({
      RecordType: 'Delivery',
      ServerID: 23,
      MessageStream: 'outbound',
      MessageID: randomUUID(),
      Recipient: 'jenny@example.com',
      Tag: 'receipt',
      DeliveredAt: iso(),
      Details: 'Test delivery webhook details',
    }),
  },
};
