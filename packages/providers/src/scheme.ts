/**
 * Schemes as data: a sender described by WHAT it signs and WHERE its id and type are, turned
 * into a WebhookSource by one engine (`createSchemeSource`). The built-in senders are entries
 * of senders.ts; an adapter file (stripe.ts, github.ts, ...) exists only for what a table entry
 * cannot say.
 *
 * The families:
 * - `hmac`: HMAC-SHA1/256/512 over a list of parts (the raw body, a timestamp, headers, the
 *   public URL, the method, literals), hex or base64, in a header (optionally a `t=..,v1=..`
 *   list). Compared as bytes, in constant time.
 * - `ed25519` / `ecdsa-p256`: an asymmetric signature over the same kind of parts, checked with
 *   the sender's PUBLIC key (configured as the source's secret).
 * - `hmac-in-body`: the signature travels inside the JSON body and covers only some fields of it
 *   (Mailgun: timestamp + token). The rest of the body is NOT authenticated: see `replayKey`.
 * - `token` / `basic`: no signature at all, a shared token in a header or Basic credentials,
 *   compared in constant time. Weaker: neither the body nor the id is authenticated, only the
 *   sender's knowledge of the token; the body hash is then always a second dedupe key.
 *
 * Verification always runs on the raw bytes, before anything is parsed; only then the id, the
 * type, a batch's elements or a handshake's answer are read.
 */
import { batchEvents, singleEvent, type EventOrigin } from './scheme-event.js';
import { authenticate, checkSignedTime, decodeKey, parseHeaders, parseTimestamp, type SchemeKey, timestampWhere } from './scheme-signature.js';
import { formParams, type IdSpec, type SchemeSourceOptions, type SenderScheme, type ValueSpec } from './scheme-spec.js';
import { checkSecrets, checkTimestamp, compactMeta, parseJsonBody, type DeliveryRequest, type Verified, type WebhookSource } from './types.js';

// The vocabulary a sender is written in, and the body readers signing code shares (what was
// scheme.ts's before the split; the other helpers of scheme-spec.ts stay inside providers/).
export {
  fieldAt,
  formParams,
  sortedFormParams,
  type BatchSpec,
  type HandshakeInput,
  type HmacAlgorithm,
  type IdSpec,
  type KeySpec,
  type SchemeSourceOptions,
  type SenderScheme,
  type SignatureSpec,
  type SignedPart,
  type TimestampSpec,
  type ValueSpec,
} from './scheme-spec.js';

/** Whether the signature covers a value at `spec` (a body field is covered when the body is). */
export function signatureCovers(scheme: SenderScheme, spec: ValueSpec | IdSpec): boolean {
  const { signature } = scheme;
  if ('join' in spec) return spec.join.every((part) => signatureCovers(scheme, part));
  if ('firstOf' in spec) return signatureCovers(scheme, { field: spec.firstOf[0]?.field ?? '' });
  if (signature.family === 'token' || signature.family === 'basic' || signature.family === 'hmac-in-body') return 'value' in spec || 'bodyHash' in spec;
  if ('value' in spec || 'bodyHash' in spec) return true;
  if ('field' in spec) return signature.signed.includes('body') || signature.signed.includes('form-params-sorted');
  return signature.signed.some((part) => typeof part === 'object' && 'header' in part && part.header.toLowerCase() === spec.header.toLowerCase());
}

/**
 * Whether the body hash must be a second dedupe key: when the id (or the type) travels where
 * the signature does not reach, a captured body replayed under a new id or type is a duplicate.
 */
export function needsBodyDedupe(scheme: SenderScheme): boolean {
  if (scheme.batch) return false; // elements are keyed by their own ids (or hashes)
  const id = scheme.id ?? { bodyHash: true };
  const type = scheme.type ?? { value: 'webhook' };
  return !signatureCovers(scheme, id) || !signatureCovers(scheme, type) || scheme.signature.family === 'hmac-in-body';
}

/**
 * A sender's scheme as a WebhookSource. At start-up: the secrets checked and decoded, the
 * options the scheme needs present (checkSchemeOptions). Per delivery: the headers' shape
 * before the body (precheck), then the signature, the signed time, a handshake's answer, and
 * the events (scheme-signature.ts, scheme-event.ts).
 */
export function createSchemeSource(scheme: SenderScheme, options: SchemeSourceOptions): WebhookSource {
  const name = options.name ?? scheme.kind;
  const tolerance = options.toleranceSeconds ?? scheme.timestamp?.toleranceSeconds ?? 300;
  const keys = checkSchemeOptions(scheme, options, name);
  const origin: EventOrigin = { name, meta: compactMeta({ sender: scheme.kind }), dedupeOnBody: needsBodyDedupe(scheme) };
  return {
    name,
    kind: scheme.kind,
    precheck(header, now) {
      const parsed = parseHeaders(scheme, header);
      if (scheme.timestamp && parsed.timestampText !== null) {
        checkTimestamp(parseTimestamp(scheme.timestamp, parsed.timestampText, timestampWhere(scheme)), now, tolerance, timestampWhere(scheme));
      }
    },
    get: scheme.get ? (query) => scheme.get!(query, options) : undefined,
    verify(request: DeliveryRequest): Verified {
      const parsed = parseHeaders(scheme, request.header);
      let parsedBody: { text: string; json: unknown } | null = null;
      const body = () => {
        parsedBody ??= scheme.body === 'form' ? parseJsonBody(Buffer.from(JSON.stringify(formParams(request.rawBody)), 'utf8')) : parseJsonBody(request.rawBody);
        return parsedBody;
      };
      // The signature first (for hmac-in-body, the body must be parsed to find it).
      const secret = authenticate(scheme, keys, options.url, request, parsed, () => body().json);
      checkSignedTime(scheme, parsed, () => body().json, request.now, tolerance);
      const { json } = body();
      const reply = scheme.handshake?.({ json, header: request.header, secret });
      // mutant: handshake-stored-as-event
      if (reply) return { reply };
      if (scheme.batch) return { events: batchEvents(scheme, scheme.batch, origin, json, request.header) };
      return { event: singleEvent(scheme, origin, body(), request) };
    },
  };
}

/** The source's secrets checked and decoded, and the options its scheme needs present; throws naming the variable to set. */
function checkSchemeOptions(scheme: SenderScheme, options: SchemeSourceOptions, name: string): SchemeKey[] {
  const minLength = scheme.minSecretLength ?? 16;
  // The names of the variables that go with the secret (sources.ts senderVariables spells them the same way).
  const variable = scheme.kind.toUpperCase().replace(/-/g, '_');
  checkSecrets(name, `${scheme.title} ${scheme.secretName}`, options.secrets, (secret) => {
    if (scheme.signature.family === 'basic' && !/^[^:]+:.+$/.test(secret)) return 'must be user:password, as in the webhook URL you give the sender';
    if (scheme.key !== 'text' || secret.length >= minLength) return null;
    return scheme.signature.family === 'basic'
      ? `is ${secret.length} characters; choose credentials of at least ${minLength}`
      : `is ${secret.length} characters; use the ${scheme.secretName} ${scheme.title} generated (at least ${minLength})`;
  });
  const keys = options.secrets.map((secret) => {
    try {
      return { secret, key: decodeKey(scheme, secret) };
    } catch (error) {
      throw new Error(`source ${name}: ${(error as Error).message}`, { cause: error });
    }
  });
  const signature = scheme.signature;
  const signsUrl = 'signed' in signature && signature.signed.includes('url');
  // mutant: sender-url-unrequired
  if (signsUrl && !options.url) {
    throw new Error(
      `source ${name}: ${scheme.title} signs the URL it posts to: set ${variable}_WEBHOOK_URL (or "url" in ONCEHOOK_SOURCES_FILE) to the public URL of /webhooks/${name} exactly as configured in ${scheme.title}`,
    );
  }
  if (scheme.get && !options.verifyToken) {
    throw new Error(
      `source ${name}: ${scheme.title} checks the endpoint with a GET carrying your verify token: set ${variable}_VERIFY_TOKEN (or "verifyToken" in ONCEHOOK_SOURCES_FILE)`,
    );
  }
  return keys;
}
