/** Mailgun: how it signs and what it sends (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks). */
import { DAY, now, hex, type TableSender } from './sender-kit.js';

export const mailgun: TableSender = {
  scheme: {
    kind: 'mailgun',
    title: 'Mailgun',
    env: 'MAILGUN_WEBHOOK_SIGNING_KEY',
    secretName: 'webhook signing key',
    key: 'text',
    // The signature is IN the body and covers only timestamp + token, not the event: the
    // token is the replay key (a captured signature cannot carry a second body).
    signature: {
      family: 'hmac-in-body',
      algorithm: 'sha256',
      encoding: 'hex',
      object: 'signature',
      signedFields: ['timestamp', 'token'],
      signatureField: 'signature',
      timestampField: 'timestamp',
    },
    timestamp: { from: { field: 'signature.timestamp' }, unit: 's', toleranceSeconds: 600 },
    id: { field: 'event-data.id' },
    type: { field: 'event-data.event' },
    signedAt: { field: 'event-data.timestamp', unit: 's' },
    replayKey: 'signature.token',
    redelivery: DAY(1, 'Mailgun retries for 8 hours'),
    dev: 'local-development-mailgun-key',
    docs: 'https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks',
  },
  payloads: {
    delivered: () => ({
      'event-data': {
        id: hex(11),
        event: 'delivered',
        timestamp: now(),
        recipient: 'jenny@example.com',
        message: { headers: { 'message-id': `${hex(8)}@mg.example.com`, subject: 'Your receipt' } },
        'delivery-status': { code: 250, message: 'OK' },
      },
    }),
  },
};
