/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>` = HMAC-SHA256 of the raw body. The legacy SHA-1
 * `X-Hub-Signature` is never accepted on its own. No signed timestamp exists, so there is no
 * tolerance check: the dedupe key is the only replay protection (see docs/providers.md).
 *
 * Stable id: `X-GitHub-Delivery` is the same on redelivery, but it is shared by every hook
 * subscribed to the event, so the event id is `<X-GitHub-Hook-ID>:<X-GitHub-Delivery>`.
 * Type: `X-GitHub-Event`, plus `.<action>` when the payload has one (`issues.opened`).
 * Rotation: GitHub signs with one secret; we accept any configured one.
 */
import { hmacSha256, signaturesEqual } from './hmac';
import { checkEventId, checkEventType, compactMeta, parseJsonObject, requireHeader, type DeliveryRequest, type Verified, type WebhookSource } from './types';
import { VerificationError } from '../errors';

export interface GitHubSourceOptions {
  name?: string;
  secrets: string[];
}

export function createGitHubSource(options: GitHubSourceOptions): WebhookSource {
  const name = options.name ?? 'github';
  if (options.secrets.length === 0) throw new Error(`source ${name}: at least one GitHub webhook secret is required`);
  return {
    name,
    kind: 'github',
    verify(request: DeliveryRequest): Verified {
      const signature = request.header('X-Hub-Signature-256');
      if (!signature) {
        const legacy = request.header('X-Hub-Signature') ? ' (the legacy SHA-1 X-Hub-Signature alone is not accepted)' : '';
        throw new VerificationError(400, 'missing_header', `missing X-Hub-Signature-256 header${legacy}`);
      }
      const match = /^sha256=([0-9a-f]{64})$/.exec(signature);
      if (!match?.[1]) throw new VerificationError(400, 'malformed_header', 'X-Hub-Signature-256 must be sha256=<64 lowercase hex digits>');
      const delivery = requireHeader(request, 'X-GitHub-Delivery');
      const hookId = requireHeader(request, 'X-GitHub-Hook-ID');
      const eventName = requireHeader(request, 'X-GitHub-Event');

      const received = match[1];
      const valid = options.secrets.some((secret) => signaturesEqual(hmacSha256(secret, request.rawBody).toString('hex'), received));
      if (!valid) throw new VerificationError(401, 'bad_signature', 'X-Hub-Signature-256 does not match the body with any configured secret');

      const eventId = checkEventId(`${hookId}:${delivery}`, 'X-GitHub-Hook-ID:X-GitHub-Delivery');
      const { text, json } = parseJsonObject(request.rawBody, 'GitHub event');
      const type = checkEventType(typeof json.action === 'string' ? `${eventName}.${json.action}` : eventName, 'X-GitHub-Event');
      return {
        event: {
          provider: name,
          kind: 'github',
          eventId,
          type,
          signedAt: null,
          rawBody: text,
          payload: json,
          meta: compactMeta({ hookId, delivery, event: eventName, targetType: request.header('X-GitHub-Hook-Installation-Target-Type') }),
        },
      };
    },
  };
}
