/** SendGrid: how it signs and what it sends (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features). */
import { DAY, now, hex, type TableSender } from './sender-kit.js';

export const sendgrid: TableSender = {
  scheme: {
    kind: 'sendgrid',
    title: 'SendGrid',
    env: 'SENDGRID_VERIFICATION_KEY',
    secretName: 'verification key',
    key: 'ecdsa-spki-base64',
    // ECDSA P-256 over timestamp + body, with the public key the Event Webhook settings show.
    signature: { family: 'ecdsa-p256', header: 'X-Twilio-Email-Event-Webhook-Signature', encoding: 'base64', signed: ['timestamp', 'body'] },
    timestamp: { from: { header: 'X-Twilio-Email-Event-Webhook-Timestamp' }, unit: 's', toleranceSeconds: 600 },
    // sg_event_id is SendGrid's documented dedupe id, but it is reported to change on retries:
    // the element's content without it is a second key (a retried element is a duplicate either way).
    batch: { items: '$', id: { field: 'sg_event_id' }, type: { field: 'event' }, signedAt: { field: 'timestamp', unit: 's' }, contentKeyWithout: ['sg_event_id'] },
    redelivery: DAY(1, 'SendGrid retries for up to 24 hours'),
    dev: {
      public: 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEPshtag7SiBlPoOIqHtkJyrp7lTTkA8kxj8DUcdSQOpeBP/2htkx/evj059m2LQDadhGGv8JpmkrnLp6cwUF81w==',
      private:
        'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgTOYGBV5bE2o0UH5m4pDJkxBn7fwSCUB1V8sYS02/MSqhRANCAAQ+yG1qDtKIGU+g4ioe2QnKunuVNOQDyTGPwNRx1JA6l4E//aG2TH96+PTn2bYtANp2EYa/wmmaSucunpzBQXzX',
    },
    docs: 'https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features',
  },
  payloads: {
    delivered: () => ({
      email: 'jenny@example.com',
      timestamp: now(),
      'smtp-id': `<${hex(8)}@ismtpd0001p1lon1.sendgrid.net>`,
      event: 'delivered',
      category: ['receipt'],
      sg_event_id: `${hex(11)}`,
      sg_message_id: `${hex(11)}.filter0001p1las1`,
      response: '250 OK',
    }),
  },
};
