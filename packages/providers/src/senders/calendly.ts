/** Calendly: how it signs and what it sends (https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures). */
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const calendly: TableSender = {
  scheme: {
    kind: 'calendly',
    title: 'Calendly',
    env: 'CALENDLY_WEBHOOK_SIGNING_KEY',
    secretName: 'webhook signing key',
    key: 'text',
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'Calendly-Webhook-Signature',
      encoding: 'hex',
      list: { separator: ',', timestampKey: 't', signatureKey: 'v1' },
      signed: ['timestamp', { literal: '.' }, 'body'],
    },
    timestamp: { from: { list: true }, unit: 's', toleranceSeconds: 180 },
    id: { bodyHash: true },
    type: { field: 'event' },
    signedAt: { field: 'created_at', unit: 'iso' },
    redelivery: DAY(1, 'Calendly retries with backoff for up to 24 hours'),
    dev: 'local-development-calendly-key',
    docs: 'https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures',
  },
  payloads: {
    'invitee.created': () => ({
      event: 'invitee.created',
      created_at: iso(),
      created_by: `https://api.calendly.com/users/${hex(8)}`,
      payload: { uri: `https://api.calendly.com/scheduled_events/${hex(8)}/invitees/${hex(8)}`, email: 'jenny@example.com', name: 'Jenny Rosen', status: 'active' },
    }),
  },
};
