/**
 * Generic HMAC-SHA256, for in-house senders: one header carries the signature of the raw
 * body (or of `<timestamp>.<raw body>` when a timestamp header is configured), hex or base64,
 * with an optional prefix such as `sha256=`. Where the stable id and the type come from is
 * configured: a header, or a field of the JSON body (dot path).
 */
import { hmacSha256, signaturesEqual } from './hmac';
import { checkEventId, checkEventType, checkTimestamp, parseJsonBody, parseUnixSeconds, requireHeader, type DeliveryRequest, type Verified, type WebhookSource } from './types';
import { VerificationError } from '../errors';

export type ValueLocation = { header: string } | { field: string };

export interface GenericHmacSourceOptions {
  name: string;
  secrets: string[];
  signatureHeader: string;
  encoding: 'hex' | 'base64';
  /** Text before the signature in the header, e.g. `sha256=`. */
  signaturePrefix?: string;
  /** When set, the signed content is `<timestamp>.<raw body>` and the timestamp is checked. */
  timestampHeader?: string;
  toleranceSeconds?: number;
  /** Where the stable event id is. */
  id: ValueLocation;
  /** Where the event type is; a fixed type when absent. */
  type?: ValueLocation | { value: string };
}

function fieldAt(json: unknown, path: string): unknown {
  let current: unknown = json;
  for (const key of path.split('.')) {
    if (typeof current !== 'object' || current === null || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

export function createGenericHmacSource(options: GenericHmacSourceOptions): WebhookSource {
  const { name } = options;
  const tolerance = options.toleranceSeconds ?? 300;
  const prefix = options.signaturePrefix ?? '';
  if (options.secrets.length === 0) throw new Error(`source ${name}: at least one HMAC secret is required`);
  return {
    name,
    kind: 'hmac',
    verify(request: DeliveryRequest): Verified {
      const header = requireHeader(request, options.signatureHeader);
      if (!header.startsWith(prefix)) throw new VerificationError(400, 'malformed_header', `${options.signatureHeader} must start with "${prefix}"`);
      const received = header.slice(prefix.length);
      const timestamp = options.timestampHeader ? parseUnixSeconds(requireHeader(request, options.timestampHeader), options.timestampHeader) : null;
      const idFromHeader = 'header' in options.id ? requireHeader(request, options.id.header) : null;

      const signed = timestamp === null ? [request.rawBody] : [`${timestamp}.`, request.rawBody];
      const valid = options.secrets.some((secret) => signaturesEqual(hmacSha256(secret, ...signed).toString(options.encoding), received));
      if (!valid) throw new VerificationError(401, 'bad_signature', `${options.signatureHeader} does not match the body with any configured secret`);
      if (timestamp !== null) checkTimestamp(timestamp, request.now, tolerance, options.timestampHeader ?? 'timestamp');

      const { text, json } = parseJsonBody(request.rawBody);
      const eventId = checkEventId(
        idFromHeader ?? fieldAt(json, (options.id as { field: string }).field),
        'header' in options.id ? options.id.header : `body field "${(options.id as { field: string }).field}"`,
      );
      const typeSpec = options.type ?? { value: 'webhook' };
      const rawType = 'value' in typeSpec ? typeSpec.value : 'header' in typeSpec ? request.header(typeSpec.header) : fieldAt(json, typeSpec.field);
      const type = checkEventType(rawType, 'header' in typeSpec ? typeSpec.header : 'field' in typeSpec ? `body field "${typeSpec.field}"` : 'type');
      return {
        event: { provider: name, kind: 'hmac', eventId, type, signedAt: timestamp === null ? null : new Date(timestamp * 1000), rawBody: text, payload: json, meta: {} },
      };
    },
  };
}
