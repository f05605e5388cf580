/** Sentry: how it signs and what it sends (https://docs.sentry.io/organization/integrations/integration-platform/webhooks/). */
import { randomUUID } from 'node:crypto';
import { iso, type TableSender } from './sender-kit.js';

export const sentry: TableSender = {
  scheme: {
    kind: 'sentry',
    title: 'Sentry',
    env: 'SENTRY_CLIENT_SECRET',
    secretName: 'integration client secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'Sentry-Hook-Signature', encoding: 'hex', signed: ['body'] },
    id: { header: 'Request-ID' },
    type: { join: [{ header: 'Sentry-Hook-Resource' }, { field: 'action' }] },
    redelivery: null,
    dev: 'local-development-sentry-secret',
    docs: 'https://docs.sentry.io/organization/integrations/integration-platform/webhooks/',
  },
  payloads: {
    'issue.created': () => ({
      action: 'created',
      installation: { uuid: randomUUID() },
      data: { issue: { id: String(Date.now()), title: 'TypeError: charge is undefined', culprit: 'checkout/pay', status: 'unresolved', firstSeen: iso() } },
      actor: { type: 'application', id: 'sentry', name: 'Sentry' },
    }),
  },
};
