/** HubSpot: how it signs and what it sends (https://developers.hubspot.com/docs/api/webhooks/validating-requests). */
import { DAY, type TableSender } from './sender-kit.js';

export const hubspot: TableSender = {
  scheme: {
    kind: 'hubspot',
    title: 'HubSpot',
    env: 'HUBSPOT_CLIENT_SECRET',
    secretName: 'app client secret',
    key: 'text',
    // v3: base64 HMAC-SHA256 of method + URL + body + timestamp; older than 5 minutes is refused.
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-HubSpot-Signature-v3', encoding: 'base64', signed: ['method', 'url', 'body', 'timestamp'] },
    timestamp: { from: { header: 'X-HubSpot-Request-Timestamp' }, unit: 'ms', toleranceSeconds: 300 },
    // Up to 100 events per request, each with its own eventId.
    batch: { items: '$', id: { field: 'eventId' }, type: { field: 'subscriptionType' }, signedAt: { field: 'occurredAt', unit: 'ms' } },
    redelivery: DAY(1, 'HubSpot retries up to 10 times over the next 24 hours'),
    dev: 'local-development-hubspot-secret',
    docs: 'https://developers.hubspot.com/docs/api/webhooks/validating-requests',
  },
  payloads: {
    'contact.creation': () => ({
      eventId: Math.floor(Math.random() * 2 ** 31),
      subscriptionId: 4711,
      portalId: 62515,
      appId: 1160452,
      occurredAt: Date.now(),
      subscriptionType: 'contact.creation',
      attemptNumber: 0,
      objectId: Math.floor(Math.random() * 2 ** 31),
      changeSource: 'CRM',
    }),
  },
};
