/** Twitch EventSub: how it signs and what it sends (https://dev.twitch.tv/docs/eventsub/handling-webhook-events/). */
import { randomUUID } from 'node:crypto';
import { DAY, iso, type TableSender } from './sender-kit.js';

export const twitch: TableSender = {
  scheme: {
    kind: 'twitch',
    title: 'Twitch EventSub',
    env: 'TWITCH_EVENTSUB_SECRET',
    secretName: 'subscription secret',
    key: 'text',
    minSecretLength: 10,
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'Twitch-Eventsub-Message-Signature',
      encoding: 'hex',
      prefix: 'sha256=',
      signed: [{ header: 'Twitch-Eventsub-Message-Id' }, { header: 'Twitch-Eventsub-Message-Timestamp' }, 'body'],
    },
    timestamp: { from: { header: 'Twitch-Eventsub-Message-Timestamp' }, unit: 'iso', toleranceSeconds: 600 },
    id: { header: 'Twitch-Eventsub-Message-Id' },
    type: { field: 'subscription.type' },
    signedAt: { field: 'event.started_at', unit: 'iso' },
    handshake: ({ json, header }) => {
      const type = header('Twitch-Eventsub-Message-Type');
      if (type === 'webhook_callback_verification') {
        const challenge = (json as { challenge?: unknown }).challenge;
        if (typeof challenge !== 'string')
          return { body: { error: 'webhook_callback_verification has no challenge' }, status: 400, note: 'Twitch verification without a challenge' };
        return { body: challenge, note: 'Twitch webhook_callback_verification answered' };
      }
      if (type === 'revocation') return { body: null, note: 'Twitch revocation acknowledged, not stored' };
      return null;
    },
    redelivery: DAY(1, 'Twitch retries a notification with the same message id for a short while, then revokes'),
    dev: 'local-development-twitch-secret',
    docs: 'https://dev.twitch.tv/docs/eventsub/handling-webhook-events/',
  },
  payloads: {
    'channel.follow': () => ({
      subscription: { id: randomUUID(), status: 'enabled', type: 'channel.follow', version: '2', cost: 0, condition: { broadcaster_user_id: '1337' }, created_at: iso() },
      event: { user_id: '1234', user_login: 'cool_user', broadcaster_user_id: '1337', broadcaster_user_login: 'cooler_user', followed_at: iso() },
    }),
  },
};
