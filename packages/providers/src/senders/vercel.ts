/** Vercel: how it signs and what it sends (https://vercel.com/docs/webhooks/webhooks-api). */
import { hex, type TableSender } from './sender-kit.js';

export const vercel: TableSender = {
  scheme: {
    kind: 'vercel',
    title: 'Vercel',
    env: 'VERCEL_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha1', header: 'x-vercel-signature', encoding: 'hex', signed: ['body'] },
    id: { field: 'id' },
    type: { field: 'type' },
    signedAt: { field: 'createdAt', unit: 'ms' },
    redelivery: null,
    dev: 'local-development-vercel-secret',
    docs: 'https://vercel.com/docs/webhooks/webhooks-api',
  },
  payloads: {
    'deployment.succeeded': () => ({
      id: `evt_${hex(12)}`,
      type: 'deployment.succeeded',
      createdAt: Date.now(),
      region: 'iad1',
      payload: { deployment: { id: `dpl_${hex(12)}`, url: 'checkout-acme.vercel.app', name: 'checkout' }, project: { id: `prj_${hex(12)}` }, target: 'production' },
    }),
  },
};
