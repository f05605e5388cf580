/**
 * Signs a delivery for a table sender (@oncehook/shared senders.ts) from its scheme: the same
 * description ingest verifies with, read the other way. Our own suite does NOT trust this
 * for verification tests: test/providers.test.ts signs with each sender's official library
 * (or its documented example) instead.
 */
import { createHmac, createPrivateKey, randomBytes, randomUUID, sign, type KeyObject } from 'node:crypto';
import { fieldAt, sortedFormParams, type IdSpec, type SenderScheme, type SignedPart, type ValueSpec } from '../scheme.js';
import { bodyHash } from '../types.js';

export interface SchemeSignOptions {
  id?: string;
  type?: string;
  timestamp?: number;
  /** The public URL, for senders that sign it (HubSpot, Square). */
  url?: string;
}

export interface SchemeDelivery {
  body: string;
  headers: Record<string, string>;
  /** The id Oncehook stores (a batch: the first element's). */
  eventId: string;
  /** Every element's id, for a batch. */
  eventIds: string[];
}

function setField(object: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let current = object;
  for (const key of keys.slice(0, -1)) {
    if (typeof current[key] !== 'object' || current[key] === null) current[key] = {};
    current = current[key] as Record<string, unknown>;
  }
  current[keys.at(-1)!] = value;
}

function privateKey(secret: string): KeyObject {
  return secret.includes('-----BEGIN') ? createPrivateKey(secret) : createPrivateKey({ key: Buffer.from(secret, 'base64'), format: 'der', type: 'pkcs8' });
}

function timeText(unit: 's' | 'ms' | 'iso', seconds: number): string {
  return unit === 's' ? String(seconds) : unit === 'ms' ? String(seconds * 1000) : new Date(seconds * 1000).toISOString();
}

/** Header names a value spec reads, and the body fields, so a type can be written where it is read. */
function placeType(spec: ValueSpec | undefined, type: string | undefined, object: Record<string, unknown> | null, headers: Record<string, string>): void {
  if (!spec || type === undefined) return;
  if ('header' in spec) headers[spec.header.toLowerCase()] = type;
  else if ('join' in spec) {
    const pieces = type.split('.');
    spec.join.forEach((part, i) => {
      const piece = i === spec.join.length - 1 ? pieces.slice(i).join('.') : pieces[i];
      if (piece !== undefined) placeType(part, piece, object, headers);
    });
  } else if ('firstOf' in spec) {
    // The type comes from whichever field is present: nothing to place.
  } else if ('field' in spec && object && typeof spec.field === 'string' && fieldAt(object, spec.field) === undefined) setField(object, spec.field, type);
}

/** Signs `payload` as the scheme's sender would. `secret` is the shared secret, or the PRIVATE key (base64 PKCS#8 or PEM) of an asymmetric sender. */
export function signSchemeDelivery(scheme: SenderScheme, payload: unknown, secret: string, options: SchemeSignOptions = {}): SchemeDelivery {
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const verbatim = typeof payload === 'string';
  // A string is sent byte for byte: JSON, or for a form sender (Twilio) the form itself.
  let value: unknown = verbatim ? (scheme.body === 'form' ? Object.fromEntries(new URLSearchParams(payload)) : JSON.parse(payload)) : structuredClone(payload);
  if (scheme.batch?.items === '$' && !Array.isArray(value)) value = [value];
  const object = !Array.isArray(value) && typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;

  // The id, where the sender puts it.
  const idSpec: IdSpec = scheme.id ?? { bodyHash: true };
  let headerId: string | null = null;
  if (!scheme.batch && 'header' in idSpec) {
    headerId = options.id ?? randomUUID();
    headers[idSpec.header.toLowerCase()] = headerId;
  } else if (!scheme.batch && 'field' in idSpec && object && !verbatim) {
    if (options.id !== undefined) setField(object, idSpec.field, options.id);
    else if (fieldAt(object, idSpec.field) === undefined) setField(object, idSpec.field, randomUUID());
  }
  // A type in a header is set even on a body sent byte for byte; a body field only on a built one.
  placeType(scheme.type, options.type, verbatim ? null : object, headers);
  if (scheme.kind === 'twitch') headers['twitch-eventsub-message-type'] = 'notification';

  // A timestamp in the body (Linear) or in the signature (Mailgun) is set before serializing.
  const tsText = timeText(scheme.timestamp?.unit ?? 's', timestamp);
  if (scheme.timestamp && 'field' in scheme.timestamp.from && object && !verbatim && scheme.signature.family !== 'hmac-in-body')
    setField(object, scheme.timestamp.from.field, Number(tsText));
  const signature = scheme.signature;
  if (signature.family === 'hmac-in-body' && object) {
    const token = randomBytes(25).toString('hex');
    const fields: Record<string, string> = { [signature.timestampField]: String(timestamp), token };
    const data = signature.signedFields.map((field) => fields[field] ?? '').join('');
    setField(object, signature.object, { ...fields, [signature.signatureField]: createHmac(signature.algorithm, secret).update(data).digest(signature.encoding) });
  }
  const form = scheme.body === 'form';
  if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
  const body =
    verbatim && signature.family !== 'hmac-in-body'
      ? (payload as string)
      : form
        ? new URLSearchParams(Object.entries(object ?? {}).map(([key, v]): [string, string] => [key, String(v)])).toString()
        : JSON.stringify(value);
  if (scheme.timestamp && 'header' in scheme.timestamp.from) headers[scheme.timestamp.from.header.toLowerCase()] = tsText;

  const content = (parts: SignedPart[]) =>
    Buffer.concat(
      parts.map((part) => {
        if (part === 'body') return Buffer.from(body, 'utf8');
        if (part === 'timestamp') return Buffer.from(tsText, 'utf8');
        if (part === 'method') return Buffer.from('POST');
        if (part === 'url') {
          if (!options.url) throw new Error(`signing as ${scheme.title} needs options.url: it signs the URL it posts to`);
          return Buffer.from(options.url, 'utf8');
        }
        if (part === 'form-params-sorted') return Buffer.from(sortedFormParams(Object.fromEntries(new URLSearchParams(body))), 'utf8');
        if ('literal' in part) return Buffer.from(part.literal, 'utf8');
        return Buffer.from(headers[part.header.toLowerCase()] ?? '', 'utf8');
      }),
    );

  switch (signature.family) {
    case 'hmac': {
      const digest = createHmac(signature.algorithm, secret).update(content(signature.signed)).digest(signature.encoding);
      headers[signature.header.toLowerCase()] = signature.list
        ? `${signature.list.timestampKey}=${tsText}${signature.list.separator}${signature.list.signatureKey}=${digest}`
        : `${signature.prefix ?? ''}${digest}`;
      break;
    }
    case 'ed25519':
      headers[signature.header.toLowerCase()] = sign(null, content(signature.signed), privateKey(secret)).toString(signature.encoding);
      break;
    case 'ecdsa-p256':
      headers[signature.header.toLowerCase()] = sign('sha256', content(signature.signed), privateKey(secret)).toString(signature.encoding);
      break;
    case 'token':
      headers[signature.header.toLowerCase()] = secret;
      break;
    case 'basic':
      headers.authorization = `Basic ${Buffer.from(secret, 'utf8').toString('base64')}`;
      break;
    case 'hmac-in-body':
      break;
  }

  const hashId = (text: string) => `sha256:${bodyHash(Buffer.from(text, 'utf8')).toString('hex')}`;
  if (scheme.batch) {
    const items = fieldAt(JSON.parse(body), scheme.batch.items);
    const spec = scheme.batch.id;
    const eventIds = (Array.isArray(items) ? items : []).map((item: unknown) =>
      'bodyHash' in spec ? hashId(JSON.stringify(item)) : 'field' in spec ? String(fieldAt(item, spec.field)) : String(headers[spec.header.toLowerCase()]),
    );
    return { body, headers, eventId: eventIds[0] ?? '', eventIds };
  }
  const parsed = () => (form ? Object.fromEntries(new URLSearchParams(body)) : JSON.parse(body));
  const eventId = headerId ?? ('field' in idSpec ? String(fieldAt(parsed(), idSpec.field)) : hashId(form ? JSON.stringify(parsed()) : body));
  return { body, headers, eventId, eventIds: [eventId] };
}
