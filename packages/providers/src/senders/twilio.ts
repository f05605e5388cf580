/** Twilio: how it signs and what it sends (https://www.twilio.com/docs/usage/webhooks/webhooks-security). */
import { hex, type TableSender } from './sender-kit.js';

export const twilio: TableSender = {
  scheme: {
    kind: 'twilio',
    title: 'Twilio',
    env: 'TWILIO_AUTH_TOKEN',
    secretName: 'auth token',
    key: 'text',
    // Form-encoded webhooks (Messaging, Voice): base64 HMAC-SHA1 of the URL Twilio posts to, then
    // every parameter name followed by its value, sorted by name.
    body: 'form',
    signature: { family: 'hmac', algorithm: 'sha1', header: 'X-Twilio-Signature', encoding: 'base64', signed: ['url', 'form-params-sorted'] },
    // The same on Twilio's retries of one webhook; not signed, so the body is a second key.
    id: { header: 'I-Twilio-Idempotency-Token' },
    type: {
      firstOf: [
        { field: 'MessageStatus', prefix: 'message.' },
        { field: 'SmsStatus', prefix: 'message.' },
        { field: 'CallStatus', prefix: 'call.' },
      ],
      default: 'request',
    },
    redelivery: null,
    dev: 'local-development-twilio-auth-token',
    docs: 'https://www.twilio.com/docs/usage/webhooks/webhooks-security',
  },
  payloads: {
    'message.delivered': () => ({
      MessageSid: `SM${hex(16)}`,
      SmsSid: `SM${hex(16)}`,
      AccountSid: `AC${hex(16)}`,
      MessagingServiceSid: `MG${hex(16)}`,
      From: '+15017122661',
      To: '+15558675310',
      MessageStatus: 'delivered',
      SmsStatus: 'delivered',
      ApiVersion: '2010-04-01',
    }),
  },
};
