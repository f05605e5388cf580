/** Zoom: how it signs and what it sends (https://developers.zoom.us/docs/api/webhooks/). */
import { createHmac } from 'node:crypto';
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const zoom: TableSender = {
  scheme: {
    kind: 'zoom',
    title: 'Zoom',
    env: 'ZOOM_WEBHOOK_SECRET_TOKEN',
    secretName: 'secret token',
    key: 'text',
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'x-zm-signature',
      encoding: 'hex',
      prefix: 'v0=',
      signed: [{ literal: 'v0:' }, 'timestamp', { literal: ':' }, 'body'],
    },
    timestamp: { from: { header: 'x-zm-request-timestamp' }, unit: 's', toleranceSeconds: 300 },
    id: { bodyHash: true },
    type: { field: 'event' },
    signedAt: { field: 'event_ts', unit: 'ms' },
    // Validation: answer {plainToken, encryptedToken = hex HMAC-SHA256(secret, plainToken)}.
    handshake: ({ json, secret }) => {
      const record = json as { event?: unknown; payload?: { plainToken?: unknown } };
      if (record.event !== 'endpoint.url_validation') return null;
      const plainToken = record.payload?.plainToken;
      if (typeof plainToken !== 'string' || plainToken === '')
        return { body: { error: 'endpoint.url_validation has no payload.plainToken' }, status: 400, note: 'Zoom validation without a plainToken' };
      return { body: { plainToken, encryptedToken: createHmac('sha256', secret).update(plainToken).digest('hex') }, note: 'Zoom endpoint.url_validation answered' };
    },
    redelivery: DAY(1, 'Zoom retries 3 times, the last 90 minutes after the first'),
    dev: 'local-development-zoom-token',
    docs: 'https://developers.zoom.us/docs/api/webhooks/',
  },
  payloads: {
    'meeting.started': () => ({
      event: 'meeting.started',
      event_ts: Date.now(),
      payload: { account_id: hex(11), object: { id: String(Date.now()), uuid: `${hex(11)}==`, topic: 'Checkout review', start_time: iso() } },
    }),
  },
};
