/** Discord (webhook events): how it signs and what it sends (https://discord.com/developers/docs/events/webhook-events). */
import { iso, type TableSender } from './sender-kit.js';

export const discord: TableSender = {
  scheme: {
    kind: 'discord',
    title: 'Discord (webhook events)',
    env: 'DISCORD_PUBLIC_KEY',
    secretName: 'application public key',
    key: 'ed25519-hex',
    signature: { family: 'ed25519', header: 'X-Signature-Ed25519', encoding: 'hex', signed: ['timestamp', 'body'] },
    timestamp: { from: { header: 'X-Signature-Timestamp' }, unit: 's', toleranceSeconds: 300 },
    id: { bodyHash: true },
    type: { field: 'event.type' },
    signedAt: { field: 'event.timestamp', unit: 'iso' },
    // PING (type 0) when the URL is saved: 204, nothing stored.
    handshake: ({ json }) => ((json as { type?: unknown }).type === 0 ? { body: null, note: 'Discord PING acknowledged' } : null),
    redelivery: null,
    dev: { public: '644c1f345495393ae263067340f72b8f69f766d465863cd2649353046cbe7bf1', private: 'MC4CAQAwBQYDK2VwBCIEIFxMu9OttBjt2KUDksc1J2Uo8ZEm5lRHm0yfSyuJhCeo' },
    docs: 'https://discord.com/developers/docs/events/webhook-events',
  },
  payloads: {
    APPLICATION_AUTHORIZED: () => ({
      version: 1,
      application_id: '1234560123453231555',
      type: 1,
      event: {
        type: 'APPLICATION_AUTHORIZED',
        timestamp: iso(),
        data: { integration_type: 0, scopes: ['applications.commands'], user: { id: String(Date.now()), username: 'jenny' } },
      },
    }),
  },
};
