/** Intercom: how it signs and what it sends (https://developers.intercom.com/docs/webhooks/setting-up-webhooks). */
import { randomUUID } from 'node:crypto';
import { DAY, now, type TableSender } from './sender-kit.js';

export const intercom: TableSender = {
  scheme: {
    kind: 'intercom',
    title: 'Intercom',
    env: 'INTERCOM_CLIENT_SECRET',
    secretName: 'client secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha1', header: 'X-Hub-Signature', encoding: 'hex', prefix: 'sha1=', signed: ['body'] },
    id: { field: 'id' },
    type: { field: 'topic' },
    signedAt: { field: 'created_at', unit: 's' },
    redelivery: DAY(1, 'Intercom retries a failed notification once, a minute later'),
    dev: 'local-development-intercom-secret',
    docs: 'https://developers.intercom.com/docs/webhooks/setting-up-webhooks',
  },
  payloads: {
    'conversation.user.created': () => ({
      type: 'notification_event',
      app_id: 'abc123',
      id: `notif_${randomUUID()}`,
      topic: 'conversation.user.created',
      delivery_attempts: 1,
      first_sent_at: now(),
      created_at: now(),
      data: { type: 'notification_event_data', item: { type: 'conversation', id: String(Date.now()), state: 'open' } },
    }),
  },
};
