/** Typeform: how it signs and what it sends (https://www.typeform.com/developers/webhooks/secure-your-webhooks/). */
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const typeform: TableSender = {
  scheme: {
    kind: 'typeform',
    title: 'Typeform',
    env: 'TYPEFORM_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'Typeform-Signature', encoding: 'base64', prefix: 'sha256=', signed: ['body'] },
    id: { field: 'event_id' },
    type: { field: 'event_type' },
    redelivery: DAY(1, 'Typeform retries for up to 10 hours'),
    dev: 'local-development-typeform-secret',
    docs: 'https://www.typeform.com/developers/webhooks/secure-your-webhooks/',
  },
  payloads: {
    form_response: () => ({
      event_id: hex(13).toUpperCase(),
      event_type: 'form_response',
      form_response: {
        form_id: 'lT4Z3j',
        token: hex(16),
        submitted_at: iso(),
        answers: [{ type: 'email', email: 'jenny@example.com', field: { id: 'SMEUb7VJz92Q', type: 'email' } }],
      },
    }),
  },
};
