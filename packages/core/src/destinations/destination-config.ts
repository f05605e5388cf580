/**
 * Destinations: forwarding each verified, claimed event to a team's own HTTP service, in any
 * language (docs/destinations.md). This file is their configuration: declared, checked once at
 * start (the processes' config.ts reads it with their other settings), every mistake a message
 * naming the field. The rest of this folder runs them.
 *
 * Two ways to declare them, usable together:
 * - environment variables for one destination: DESTINATION_URL, DESTINATION_SECRET, and
 *   optionally DESTINATION_NAME, DESTINATION_SOURCES, DESTINATION_TYPES, DESTINATION_TIMEOUT_MS;
 * - a JSON file, `{ "destinations": [...] }`: ONCEHOOK_DESTINATIONS_FILE, or a `destinations`
 *   list in the sources file (ONCEHOOK_SOURCES_FILE), for any number of them with filters,
 *   limits, headers and keys.
 * Secrets are given as the name of an environment variable (`secretEnv`, `signingKeyEnv`,
 * header values with `headersEnv`) or inline (`secret`: fine for tests); they are never printed.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '@oncehook/sdk';
import { isIP } from 'node:net';
import { addressProblem, headerValueProblem, withoutEmpty, type Env } from '@oncehook/shared';
import { z } from 'zod';

/** A destination's name: the id of its runs (like a handler's name), its metrics and its pause. */
export const DESTINATION_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** A JSON path into the payload: dot-separated keys (`data.object.customer`), array indexes as numbers (`items.0.sku`). */
const jsonPath = z.string().regex(/^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/, 'a JSON path is dot-separated keys, e.g. "data.object.currency"');

const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** One condition of a filter: every condition must hold for an event to be forwarded. */
const condition = z.union([
  z.object({ path: jsonPath, equals: scalar }).strict(),
  z.object({ path: jsonPath, in: z.array(scalar).min(1).max(1000) }).strict(),
  z.object({ path: jsonPath, exists: z.boolean() }).strict(),
]);

const period = z.union([z.number().int().min(100).max(86_400_000), z.string().regex(/^\d{1,9}(ms|s|m|h)$/, "a period is like '1s', '500ms', '1m', '1h'")]);

const declarationSchema = z
  .object({
    name: z.string().regex(DESTINATION_NAME_PATTERN, 'a destination name is 1-63 characters of a-z 0-9 . _ - (it names its runs, its metrics and its pause)'),
    url: z.string().url('the URL to POST each event to, e.g. https://billing.internal/webhooks/oncehook'),
    /** Source names or kinds whose events it takes; `["*"]` (default): every source. */
    sources: z
      .array(z.string().regex(/^(\*|[a-z0-9][a-z0-9_-]{0,62})$/, 'a source name or kind, or "*"'))
      .min(1)
      .default(['*']),
    /** Event types: exact (`charge.refunded`), a prefix glob (`invoice.*`), or `*` (default). */
    types: z
      .array(z.string().regex(/^(\*|[\x21-\x7e]{1,255})$/, 'an event type, a glob like "invoice.*", or "*"'))
      .min(1)
      .default(['*']),
    /** Conditions on the payload, all of which must hold: equals, in, exists. */
    filter: z.array(condition).max(50).default([]),
    /** The signing secret (`whsec_<base64>`), inline: prefer secretEnv. */
    secret: z.string().min(1).optional(),
    /** The environment variable holding the signing secret. */
    secretEnv: z.string().min(1).optional(),
    /** The environment variable holding an ed25519 private key (`whsk_<base64 of the 32-byte seed>`): adds a `v1a,` signature. */
    signingKeyEnv: z.string().min(1).optional(),
    /** How long one call may take, ms (default 10000; at most 5 minutes). */
    timeoutMs: z.number().int().min(100).max(300_000).default(10_000),
    /** Extra headers sent with every call (never logged, never shown). */
    headers: z.record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'a header name'), z.string()).default({}),
    /** Extra headers whose values come from environment variables: `{ "Authorization": "CRM_AUTH" }`. */
    headersEnv: z.record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'a header name'), z.string().min(1)).default({}),
    /** At most N calls in flight across the fleet; or per key: `{ key: "data.object.customer", limit: 1 }`. */
    concurrency: z.union([z.number().int().min(1).max(10_000), z.object({ key: jsonPath, limit: z.number().int().min(1).max(10_000) }).strict()]).optional(),
    /** Calls start no faster than `limit` per `period` (optionally per key). */
    rateLimit: z
      .object({ limit: z.number().int().min(1).max(100_000), period, key: jsonPath.optional() })
      .strict()
      .optional(),
    retries: z
      .object({ maxAttempts: z.number().int().min(1).max(1000).optional(), backoffMs: z.number().int().min(0).max(600_000).optional() })
      .strict()
      .optional(),
    priority: z.enum(['high', 'normal', 'low']).optional(),
    circuitBreaker: z
      .object({ consecutiveFailures: z.number().int().min(1).max(10_000) })
      .strict()
      .optional(),
    /** Redirects are not followed unless allowed (then 307/308 only, up to 5 hops, never https -> http; headers dropped when a hop leaves the origin). */
    followRedirects: z.boolean().default(false),
    /** Allows a URL whose host is or resolves to a link-local, unspecified or cloud metadata address (169.254.0.0/16, fe80::/10, 100.100.100.200, ...), in any IPv6 form. */
    allowLinkLocal: z.boolean().default(false),
    description: z.string().max(200).optional(),
  })
  .strict();

export type DestinationDeclaration = z.infer<typeof declarationSchema>;
export type DestinationCondition = z.infer<typeof condition>;

/** A destination, checked and resolved: what the engine runs. */
export interface Destination {
  name: string;
  url: URL;
  sources: string[];
  types: string[];
  filter: DestinationCondition[];
  /** The HMAC key (decoded from `whsec_<base64>`). */
  hmacKey: Buffer;
  /** The ed25519 private key for `v1a,` signatures, when configured. */
  signingKey: KeyObject | null;
  timeoutMs: number;
  headers: Record<string, string>;
  concurrency?: { limit: number; key?: string };
  rateLimit?: { limit: number; period: string | number; key?: string };
  retries?: { maxAttempts?: number; backoffMs?: number };
  priority?: 'high' | 'normal' | 'low';
  circuitBreaker?: { consecutiveFailures: number };
  followRedirects: boolean;
  allowLinkLocal: boolean;
  description?: string;
}

/** Headers a destination may not set: Oncehook's own (the signature, the key, the content type). */
const RESERVED_HEADERS = [
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
  'idempotency-key',
  'content-type',
  'content-length',
  'host',
  'x-oncehook-source',
  'x-oncehook-type',
];

/** `whsec_<base64>` -> the HMAC key. */
export function destinationHmacKey(secret: string): Buffer {
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new Error('must be whsec_ followed by base64 (24 bytes or more; generate one: oncehook destinations --new-secret)');
  const key = Buffer.from(encoded, 'base64');
  if (key.length < 24) throw new Error(`decodes to ${key.length} bytes; use at least 24 (generate one: oncehook destinations --new-secret)`);
  return key;
}

/** `whsk_<base64 of a 32-byte ed25519 seed>` -> the private key. */
export function destinationSigningKey(value: string): KeyObject {
  if (!value.startsWith('whsk_')) throw new Error('must be whsk_ followed by the base64 of a 32-byte ed25519 seed');
  const seed = Buffer.from(value.slice('whsk_'.length), 'base64');
  if (seed.length !== 32) throw new Error(`decodes to ${seed.length} bytes; an ed25519 seed is 32`);
  // PKCS#8 for an ed25519 seed: a fixed 16-byte prefix, then the seed.
  return createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });
}

/** The receiver's `whpk_` public key for a `whsk_` private key (what `oncehook destinations` prints for the receiver). */
export function destinationPublicKey(privateKey: KeyObject): string {
  const spki = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  return `whpk_${spki.subarray(spki.length - 32).toString('base64')}`;
}

function check(declaration: DestinationDeclaration, env: Env, where: string): Destination {
  const field = (name: string) => `${where} destination "${declaration.name}": ${name}`;
  if (declaration.secret && declaration.secretEnv) throw new ConfigError(`${field('secret')}: give secret or secretEnv, not both`);
  const secret = declaration.secretEnv ? env[declaration.secretEnv] : declaration.secret;
  if (!secret) {
    throw new ConfigError(
      declaration.secretEnv
        ? `${field('secretEnv')}: the environment variable ${declaration.secretEnv} is not set (the signing secret, whsec_...)`
        : `${field('secretEnv')}: no signing secret: set secretEnv to the name of a variable holding a whsec_ secret`,
    );
  }
  let hmacKey: Buffer;
  try {
    hmacKey = destinationHmacKey(secret);
  } catch (error) {
    throw new ConfigError(`${field(declaration.secretEnv ? `secretEnv (${declaration.secretEnv})` : 'secret')}: ${(error as Error).message}`);
  }
  let signingKey: KeyObject | null = null;
  if (declaration.signingKeyEnv) {
    const value = env[declaration.signingKeyEnv];
    if (!value) throw new ConfigError(`${field('signingKeyEnv')}: the environment variable ${declaration.signingKeyEnv} is not set`);
    try {
      signingKey = destinationSigningKey(value);
    } catch (error) {
      throw new ConfigError(`${field(`signingKeyEnv (${declaration.signingKeyEnv})`)}: ${(error as Error).message}`);
    }
  }
  const url = new URL(declaration.url);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConfigError(`${field('url')}: must be http:// or https:// (got ${url.protocol})`);
  if (url.username || url.password) throw new ConfigError(`${field('url')}: carries credentials; put them in headersEnv (e.g. Authorization) instead`);
  // An address in the URL is checked now; a name, when the worker starts and at every connection.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const literal = isIP(host) && !declaration.allowLinkLocal ? addressProblem(host, host) : null;
  if (literal) throw new ConfigError(`${field('url')}: ${literal}; set allowLinkLocal: true if that really is the service`);
  // Header values are checked here so that no call can fail on one (a client's error would
  // quote it); the messages name the field and never show the value.
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(declaration.headers)) {
    const problem = headerValueProblem(value);
    if (problem) throw new ConfigError(`${field(`headers.${name}`)}: the value ${problem} (not shown here)`);
    headers[name] = value;
  }
  for (const [name, variable] of Object.entries(declaration.headersEnv)) {
    const value = env[variable];
    if (value === undefined) throw new ConfigError(`${field(`headersEnv.${name}`)}: the environment variable ${variable} is not set`);
    const problem = headerValueProblem(value);
    if (problem) throw new ConfigError(`${field(`headersEnv.${name}`)}: the value of ${variable} ${problem} (not shown here)`);
    headers[name] = value;
  }
  for (const name of Object.keys(headers)) {
    if (RESERVED_HEADERS.includes(name.toLowerCase())) throw new ConfigError(`${field(`headers.${name}`)}: Oncehook sets this header itself`);
  }
  return {
    name: declaration.name,
    url,
    sources: declaration.sources,
    types: declaration.types,
    filter: declaration.filter,
    hmacKey,
    signingKey,
    timeoutMs: declaration.timeoutMs,
    headers,
    ...(declaration.concurrency === undefined ? {} : { concurrency: typeof declaration.concurrency === 'number' ? { limit: declaration.concurrency } : declaration.concurrency }),
    ...(declaration.rateLimit ? { rateLimit: declaration.rateLimit } : {}),
    ...(declaration.retries ? { retries: declaration.retries } : {}),
    ...(declaration.priority ? { priority: declaration.priority } : {}),
    ...(declaration.circuitBreaker ? { circuitBreaker: declaration.circuitBreaker } : {}),
    followRedirects: declaration.followRedirects,
    allowLinkLocal: declaration.allowLinkLocal,
    ...(declaration.description ? { description: declaration.description } : {}),
  };
}

/** One message for every problem of a declaration list, each naming the destination and field. */
function parseList(value: unknown, where: string): DestinationDeclaration[] {
  const result = z.array(declarationSchema).safeParse(value);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const [index, ...rest] = issue.path;
    const name = typeof index === 'number' ? ((value as { name?: unknown }[])[index]?.name ?? `#${index + 1}`) : '?';
    return `  ${where} destination ${JSON.stringify(name)}: ${rest.join('.') || '(the entry)'}: ${issue.message}`;
  });
  throw new ConfigError(`Invalid destinations; fix these fields:\n${lines.join('\n')}`);
}

function readJson(file: string, variable: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`${variable}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${variable}: ${file} is not JSON: ${(error as Error).message}`);
  }
}

/** The declarations of the environment form (DESTINATION_URL ...), or none. */
/** The variables that declare destinations (the processes' config.ts lists them with its own). */
export const DESTINATION_VARIABLES = [
  'DESTINATION_URL',
  'DESTINATION_SECRET',
  'DESTINATION_NAME',
  'DESTINATION_SOURCES',
  'DESTINATION_TYPES',
  'DESTINATION_TIMEOUT_MS',
  'ONCEHOOK_DESTINATIONS_FILE',
] as const;

function fromVariables(all: Env): DestinationDeclaration[] {
  // Empty is unset: docker-compose.yml passes every variable, `${DESTINATION_NAME:-}` included.
  const env: Env = withoutEmpty(all);
  if (!env.DESTINATION_URL) {
    const stray = DESTINATION_VARIABLES.filter((name) => name.startsWith('DESTINATION_') && name !== 'DESTINATION_URL' && env[name]);
    if (stray.length > 0) throw new ConfigError(`${stray.join(', ')} set without DESTINATION_URL: set DESTINATION_URL to the URL to forward events to`);
    return [];
  }
  const list = (value: string | undefined) =>
    value
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const timeout = env.DESTINATION_TIMEOUT_MS === undefined ? undefined : Number(env.DESTINATION_TIMEOUT_MS);
  return parseList(
    [
      {
        name: env.DESTINATION_NAME ?? 'forward',
        url: env.DESTINATION_URL,
        ...(list(env.DESTINATION_SOURCES) ? { sources: list(env.DESTINATION_SOURCES) } : {}),
        ...(list(env.DESTINATION_TYPES) ? { types: list(env.DESTINATION_TYPES) } : {}),
        secretEnv: 'DESTINATION_SECRET',
        ...(timeout === undefined ? {} : { timeoutMs: timeout }),
      },
    ],
    'DESTINATION_*:',
  );
}

/**
 * Every configured destination, checked: the environment form, ONCEHOOK_DESTINATIONS_FILE, and
 * the sources file's `destinations`. Names must be unique. Throws ConfigError naming the field.
 */
export function loadDestinations(env: Env = process.env): Destination[] {
  const found: { declaration: DestinationDeclaration; where: string }[] = fromVariables(env).map((declaration) => ({ declaration, where: 'DESTINATION_*:' }));
  for (const variable of ['ONCEHOOK_DESTINATIONS_FILE', 'ONCEHOOK_SOURCES_FILE'] as const) {
    const file = env[variable];
    if (!file) continue;
    const json = readJson(file, variable);
    const list = (json as { destinations?: unknown })?.destinations;
    if (list === undefined) {
      if (variable === 'ONCEHOOK_DESTINATIONS_FILE')
        throw new ConfigError(`${variable}: ${file} has no "destinations" list: write { "destinations": [ { "name": ..., "url": ..., "secretEnv": ... } ] }`);
      continue;
    }
    for (const declaration of parseList(list, `${variable} (${file}):`)) found.push({ declaration, where: `${variable} (${file}):` });
  }
  const seen = new Map<string, string>();
  const destinations: Destination[] = [];
  for (const { declaration, where } of found) {
    const earlier = seen.get(declaration.name);
    if (earlier) throw new ConfigError(`${where} destination "${declaration.name}": name: already used by a destination of ${earlier}; names must be unique`);
    seen.set(declaration.name, where);
    destinations.push(check(declaration, env, where));
  }
  return destinations;
}

/** Whether a destination takes events of this source (name or kind) and type. */
export function destinationTakes(destination: Pick<Destination, 'sources' | 'types'>, source: string, kind: string, type: string): boolean {
  const takesSource = destination.sources.some((s) => s === '*' || s === source || s === kind);
  return takesSource && destination.types.some((pattern) => typeMatchesPattern(pattern, type));
}

/** `*` any type; `invoice.*` any type starting with `invoice.`; else the exact type. */
export function typeMatchesPattern(pattern: string, type: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
}

/** The value at a JSON path (dot-separated keys, numeric array indexes), or undefined. */
export function valueAt(payload: unknown, path: string): unknown {
  let value: unknown = payload;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = Array.isArray(value) ? (/^\d+$/.test(part) ? value[Number(part)] : undefined) : (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Null when the payload passes every condition, else why not (for the run's record). */
export function filterProblem(filter: DestinationCondition[], payload: unknown): string | null {
  for (const c of filter) {
    const value = valueAt(payload, c.path);
    if ('equals' in c && value !== c.equals) return `${c.path} is ${JSON.stringify(value) ?? 'missing'}, not ${JSON.stringify(c.equals)}`;
    if ('in' in c && !c.in.some((v) => v === value)) return `${c.path} is ${JSON.stringify(value) ?? 'missing'}, not one of ${JSON.stringify(c.in)}`;
    if ('exists' in c && (value !== undefined) !== c.exists) return `${c.path} ${c.exists ? 'is missing' : 'is present'}`;
  }
  return null;
}
