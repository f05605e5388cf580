/** Meta (WhatsApp, Messenger, Instagram): how it signs and what it sends (https://developers.facebook.com/docs/graph-api/webhooks/getting-started). */
import { secretsEqual } from '../hmac.js';
import { DAY, now, hex, type TableSender } from './sender-kit.js';

export const meta: TableSender = {
  scheme: {
    kind: 'meta',
    title: 'Meta (WhatsApp, Messenger, Instagram)',
    env: 'META_APP_SECRET',
    secretName: 'app secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Hub-Signature-256', encoding: 'hex', prefix: 'sha256=', signed: ['body'] },
    // Batched: several `entry` elements per delivery, none with an id: each is keyed by its hash.
    batch: { items: 'entry', id: { bodyHash: true }, type: { field: 'changes.0.field', default: 'messaging' }, signedAt: { field: 'time', unit: 's' } },
    get: (query, options) => {
      if (query.get('hub.mode') !== 'subscribe') return { body: { error: 'hub.mode must be subscribe' }, status: 400, note: 'Meta GET without hub.mode=subscribe' };
      const challenge = query.get('hub.challenge') ?? '';
      // mutant: meta-verify-token-unchecked
      if (!options.verifyToken || !secretsEqual(options.verifyToken, query.get('hub.verify_token') ?? '')) {
        return { body: { error: 'hub.verify_token is not the configured verify token' }, status: 403, note: 'Meta subscription check with a wrong verify token refused' };
      }
      return { body: challenge, note: 'Meta subscription check answered' };
    },
    redelivery: DAY(7, 'Meta retries failed deliveries for up to 7 days (WhatsApp Cloud API)'),
    dev: 'local-development-meta-app-secret',
    docs: 'https://developers.facebook.com/docs/graph-api/webhooks/getting-started',
  },
  payloads: {
    messages: () => ({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: String(Date.now()),
          time: now(),
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: '15550000000', phone_number_id: '123456123' },
                messages: [{ from: '16315551181', id: `wamid.${hex(16)}`, timestamp: String(now()), type: 'text', text: { body: 'Where is my order?' } }],
              },
            },
          ],
        },
      ],
    }),
  },
};
