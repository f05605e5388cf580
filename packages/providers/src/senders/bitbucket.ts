/** Bitbucket: how it signs and what it sends (https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/). */
import { randomUUID } from 'node:crypto';
import { DAY, hex, type TableSender } from './sender-kit.js';

export const bitbucket: TableSender = {
  scheme: {
    kind: 'bitbucket',
    title: 'Bitbucket',
    env: 'BITBUCKET_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Hub-Signature', encoding: 'hex', prefix: 'sha256=', signed: ['body'] },
    id: { header: 'X-Request-UUID' },
    type: { header: 'X-Event-Key' },
    redelivery: DAY(1, 'Bitbucket retries a failed delivery twice more'),
    dev: 'local-development-bitbucket-secret',
    docs: 'https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/',
  },
  payloads: {
    'repo:push': () => ({
      actor: { display_name: 'Jenny Rosen', uuid: `{${randomUUID()}}` },
      repository: { full_name: 'acme/checkout', uuid: `{${randomUUID()}}` },
      push: { changes: [{ new: { type: 'branch', name: 'main', target: { hash: hex(20), message: 'Charge once\n' } } }] },
    }),
  },
};
