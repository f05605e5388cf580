/** Mux: how it signs and what it sends (https://docs.mux.com/core/verify-webhook-signatures). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const mux: TableSender = {
  scheme: {
    kind: 'mux',
    title: 'Mux',
    env: 'MUX_WEBHOOK_SECRET',
    secretName: 'signing secret',
    key: 'text',
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'Mux-Signature',
      encoding: 'hex',
      list: { separator: ',', timestampKey: 't', signatureKey: 'v1' },
      signed: ['timestamp', { literal: '.' }, 'body'],
    },
    timestamp: { from: { list: true }, unit: 's', toleranceSeconds: 300 },
    id: { field: 'id' },
    type: { field: 'type' },
    signedAt: { field: 'created_at', unit: 'iso' },
    redelivery: DAY(1, 'Mux retries for up to 24 hours'),
    dev: 'local-development-mux-secret',
    docs: 'https://docs.mux.com/core/verify-webhook-signatures',
  },
  payloads: {
    'video.asset.ready': () => ({
      type: 'video.asset.ready',
      id: randomUUID(),
      created_at: iso(),
      object: { type: 'asset', id: hex(16) },
      environment: { name: 'Production', id: hex(3) },
      data: { id: hex(16), status: 'ready', duration: 23.4, playback_ids: [{ id: hex(16), policy: 'public' }] },
    }),
  },
};
