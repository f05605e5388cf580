/**
 * A scheme's signature, checked (scheme.ts runs these in order): the headers' presence and
 * shape before the body (parseHeaders), the configured secrets as keys (decodeKey), the signed
 * content rebuilt from the request (signedContent), the signature against every key in constant
 * time (authenticate), and the signed time within the tolerance (checkSignedTime).
 */
import { createHmac, createPublicKey, type KeyObject, verify as verifySignature } from 'node:crypto';
import { VerificationError } from '@oncehook/shared';
import { decodeSignature, digestMatches, secretsEqual } from './hmac.js';
import { fieldAt, formParams, sortedFormParams, timeOf, type HmacAlgorithm, type SenderScheme, type SignedPart, type TimestampSpec } from './scheme-spec.js';
import { checkTimestamp, isRecord, parseUnixSeconds, type DeliveryRequest } from './types.js';

const HASH_LENGTH: Record<HmacAlgorithm, number> = { sha1: 20, sha256: 32, sha512: 64 };
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** A configured secret turned into what verifies: an HMAC key, or a public key object. */
export function decodeKey(scheme: SenderScheme, secret: string): string | KeyObject {
  switch (scheme.key) {
    case 'text':
      return secret;
    case 'ed25519-hex': {
      if (!/^[0-9a-fA-F]{64}$/.test(secret)) throw new Error(`a ${scheme.title} ${scheme.secretName} is 64 hex digits (an ed25519 public key)`);
      return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(secret, 'hex')]), format: 'der', type: 'spki' });
    }
    case 'ed25519-whpk': {
      const raw = Buffer.from(secret.replace(/^whpk_/, ''), 'base64');
      if (!secret.startsWith('whpk_') || raw.length !== 32)
        throw new Error(`a ${scheme.title} ${scheme.secretName} is whpk_ followed by the base64 of a 32-byte ed25519 public key`);
      return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
    }
    case 'ecdsa-spki-base64': {
      let key: KeyObject;
      try {
        key = createPublicKey({ key: Buffer.from(secret, 'base64'), format: 'der', type: 'spki' });
      } catch {
        throw new Error(`a ${scheme.title} ${scheme.secretName} is the base64 public key the dashboard shows (an ECDSA P-256 key)`);
      }
      if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
        throw new Error(`a ${scheme.title} ${scheme.secretName} must be an ECDSA P-256 public key`);
      }
      return key;
    }
  }
}

export interface Parsed {
  signatures: string[];
  timestampText: string | null;
}

/** The signature and timestamp headers, checked for presence and shape (before the body). */
export function parseHeaders(scheme: SenderScheme, header: DeliveryRequest['header']): Parsed {
  const { signature, timestamp } = scheme;
  const need = (name: string) => {
    const value = header(name);
    if (value === null || value === '') throw new VerificationError(400, 'missing_header', `missing ${name} header`);
    return value;
  };
  let timestampText: string | null = timestamp && 'header' in timestamp.from ? need(timestamp.from.header) : null;
  if (signature.family === 'token') {
    need(signature.header);
    return { signatures: [], timestampText };
  }
  if (signature.family === 'basic') {
    if (!/^Basic [A-Za-z0-9+/]+=*$/.test(header('Authorization') ?? '')) {
      throw new VerificationError(401, 'bad_credentials', 'missing Authorization: Basic credentials (set them in the webhook URL as the sender documents)');
    }
    return { signatures: [], timestampText };
  }
  if (signature.family === 'hmac-in-body') return { signatures: [], timestampText };
  const value = need(signature.header);
  const prefix = 'prefix' in signature ? (signature.prefix ?? '') : '';
  if ('list' in signature && signature.list) {
    const list = signature.list;
    const signatures: string[] = [];
    for (const part of value.split(list.separator)) {
      const eq = part.indexOf('=');
      const key = part.slice(0, eq).trim();
      const element = part.slice(eq + 1).trim();
      if (key === list.timestampKey) {
        if (timestampText !== null) throw new VerificationError(400, 'malformed_header', `${signature.header} must carry exactly one ${list.timestampKey}= element`);
        timestampText = element;
      } else if (key === list.signatureKey) signatures.push(element);
    }
    if (timestamp && 'list' in timestamp.from && timestampText === null)
      throw new VerificationError(400, 'malformed_header', `${signature.header} has no ${list.timestampKey}= element`);
    if (signatures.length === 0) throw new VerificationError(400, 'malformed_header', `${signature.header} has no ${list.signatureKey}= signature`);
    return { signatures, timestampText };
  }
  if (!value.startsWith(prefix)) throw new VerificationError(400, 'malformed_header', `${signature.header} must start with "${prefix}"`);
  const received = value.slice(prefix.length);
  const expectedLength = signature.family === 'hmac' ? HASH_LENGTH[signature.algorithm] : null;
  const bytes = decodeSignature(received, signature.encoding);
  if (bytes === null || (expectedLength !== null && bytes.length !== expectedLength)) {
    throw new VerificationError(
      400,
      'malformed_header',
      `${signature.header} must be ${prefix}<${signature.encoding} of a ${expectedLength ?? 'signature'}${expectedLength ? '-byte digest' : ''}>`,
    );
  }
  return { signatures: [received], timestampText };
}

/** The signed time as a Date (401 reasons for too old / in the future come from checkTimestamp). */
export function parseTimestamp(spec: TimestampSpec, text: string, where: string): number {
  if (spec.unit === 's') return parseUnixSeconds(text, where);
  const date = timeOf(spec.unit === 'ms' && /^\d{1,15}$/.test(text) ? Number(text) : text, spec.unit);
  if (!date) throw new VerificationError(400, 'malformed_header', `${where} must be ${spec.unit === 'ms' ? 'Unix milliseconds' : 'an RFC 3339 time'}`);
  return Math.floor(date.getTime() / 1000);
}

export function timestampWhere(scheme: SenderScheme): string {
  const from = scheme.timestamp?.from;
  if (!from) return 'timestamp';
  if ('header' in from) return from.header;
  if ('field' in from) return `body field "${from.field}"`;
  return `${scheme.signature.family !== 'token' && 'header' in scheme.signature ? scheme.signature.header : 'signature'} timestamp`;
}

/** A configured secret with what verifies it (an HMAC key, or a public key object). */
export interface SchemeKey {
  secret: string;
  key: string | KeyObject;
}

/** The signed content for one request: the scheme's parts, in order, as bytes. */
function signedContent(parts: SignedPart[], request: DeliveryRequest, timestampText: string | null, url: string | undefined): Buffer {
  const pieces = parts.map((part): Buffer => {
    if (part === 'body') return request.rawBody;
    if (part === 'timestamp') return Buffer.from(timestampText ?? '', 'utf8');
    if (part === 'url') return Buffer.from(url ?? '', 'utf8');
    if (part === 'method') return Buffer.from('POST', 'utf8');
    if (part === 'form-params-sorted') return Buffer.from(sortedFormParams(formParams(request.rawBody)), 'utf8');
    if ('literal' in part) return Buffer.from(part.literal, 'utf8');
    return Buffer.from(request.header(part.header) ?? '', 'utf8');
  });
  return Buffer.concat(pieces);
}

/**
 * Checks the signature against every configured key (a rotation verifies with either); returns
 * the secret that verified (the Zoom handshake needs it). `json` parses the body, for a
 * signature that travels inside it.
 */
export function authenticate(scheme: SenderScheme, keys: SchemeKey[], url: string | undefined, request: DeliveryRequest, parsed: Parsed, json: () => unknown): string {
  const { signature } = scheme;
  switch (signature.family) {
    case 'hmac': {
      const data = signedContent(signature.signed, request, parsed.timestampText, url);
      for (const { secret, key } of keys) {
        const expected = createHmac(signature.algorithm, key as string)
          .update(data)
          .digest();
        if (parsed.signatures.some((candidate) => digestMatches(expected, candidate, signature.encoding))) return secret;
      }
      throw new VerificationError(401, 'bad_signature', `${signature.header} does not match the body with any configured ${scheme.secretName}`);
    }
    case 'ed25519':
    case 'ecdsa-p256': {
      const data = signedContent(signature.signed, request, parsed.timestampText, url);
      const received = decodeSignature(parsed.signatures[0] ?? '', signature.encoding);
      for (const { secret, key } of keys) {
        // ed25519 takes no digest name; ECDSA P-256 signs the SHA-256 of the content (DER).
        // mutant: scheme-asymmetric-unchecked
        const ok = received !== null && verifySignature(signature.family === 'ed25519' ? null : 'sha256', data, key as KeyObject, received);
        if (ok) return secret;
      }
      throw new VerificationError(401, 'bad_signature', `${signature.header} is not a signature of the body by any configured ${scheme.secretName}`);
    }
    case 'hmac-in-body': {
      const holder = fieldAt(json(), signature.object);
      const text = (field: string) => {
        const value = isRecord(holder) ? holder[field] : undefined;
        if (typeof value !== 'string' && typeof value !== 'number') throw new VerificationError(400, 'malformed_payload', `body field "${signature.object}.${field}" is missing`);
        return String(value);
      };
      const data = signature.signedFields.map(text).join('');
      const received = text(signature.signatureField);
      for (const { secret, key } of keys) {
        const expected = createHmac(signature.algorithm, key as string)
          .update(data)
          .digest();
        // mutant: scheme-in-body-signature-unchecked
        if (digestMatches(expected, received, signature.encoding)) return secret;
      }
      throw new VerificationError(401, 'bad_signature', `"${signature.object}.${signature.signatureField}" does not match with any configured ${scheme.secretName}`);
    }
    case 'token': {
      const received = request.header(signature.header) ?? '';
      // mutant: scheme-token-unchecked
      const token = keys.find(({ secret }) => secretsEqual(secret, received));
      if (!token) throw new VerificationError(401, 'bad_credentials', `${signature.header} is not a configured ${scheme.secretName}`);
      return token.secret;
    }
    case 'basic': {
      const received = Buffer.from((request.header('Authorization') ?? '').slice('Basic '.length), 'base64').toString('utf8');
      const match = keys.find(({ secret }) => secretsEqual(secret, received));
      if (!match) throw new VerificationError(401, 'bad_credentials', `the Basic credentials are not the configured ${scheme.secretName} (user:password)`);
      return match.secret;
    }
  }
}

/**
 * After the signature: the signed time (from a header, a list element or a body field) within
 * `tolerance` seconds of `now`. A time in the body is read only now that the body is authentic.
 */
export function checkSignedTime(scheme: SenderScheme, parsed: Parsed, json: () => unknown, now: Date, tolerance: number): void {
  let timestampText = parsed.timestampText;
  if (scheme.timestamp && 'field' in scheme.timestamp.from) {
    const value = fieldAt(json(), scheme.timestamp.from.field);
    timestampText = value === undefined || value === null ? null : String(value);
    if (timestampText === null) throw new VerificationError(400, 'malformed_payload', `body field "${scheme.timestamp.from.field}" (the signed time) is missing`);
  }
  if (timestampText !== null) {
    const spec = scheme.timestamp ?? { unit: 's' as const, toleranceSeconds: tolerance, from: { list: true as const } };
    // mutant: scheme-timestamp-unchecked
    checkTimestamp(parseTimestamp(spec, timestampText, timestampWhere(scheme)), now, tolerance, timestampWhere(scheme));
  }
}
