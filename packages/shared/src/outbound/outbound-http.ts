/**
 * The one HTTP client of Oncehook's own outbound calls (destinations, failure notifications, the
 * providers' APIs for backfill), with the guard built into it (docs/security.md, "Outbound
 * calls"):
 *
 * - The address is checked where the connection is made: in the client's DNS lookup (every
 *   address a name resolves to) and in its connector (an address written in the URL), on every
 *   connection and every redirect hop. What is checked is what is connected to, so a DNS answer
 *   that changes between a check and the call (rebinding) cannot slip through; TLS still
 *   verifies the host name.
 * - Redirects are followed only when the caller asks, only 307/308 for a request with a body
 *   (a 301/302/303 would turn the POST into a GET), never from https to http, at most
 *   `maxRedirects` hops; a hop that leaves the origin drops the caller's secret headers.
 * - `allowedOrigins` pins every URL, the first and each hop, to the origins named (a provider's
 *   API: its pagination links and redirects cannot take the key elsewhere).
 * - `maxResponseBytes` bounds what an answer's body may hold; past it the body fails.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, buildConnector, fetch as undiciFetch, Response, type Dispatcher } from 'undici';
import { addressProblem } from './address-guard.js';

/** Why an outbound call was not made, or its answer not read. Its message never quotes a header value. */
export class OutboundRefusedError extends Error {
  override name = 'OutboundRefusedError';
  constructor(
    readonly reason: 'address' | 'redirect' | 'origin' | 'too-large',
    message: string,
  ) {
    super(message);
  }
}

/** Resolves a host name to every address it has (tests pass one that answers as they need). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export interface OutboundPolicy {
  /** Allows link-local, unspecified and metadata addresses (a destination that says so). */
  allowLinkLocal?: boolean;
  /** Default: the system's resolver (dns.lookup, every address). */
  resolve?: Resolver;
  /** Extra certificate authorities to trust (tests' own TLS servers). */
  ca?: string | Buffer;
}

const systemResolve: Resolver = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))));

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net.connect/tls.connect: resolves, refuses when ANY address is refused (a name
 * that answers both a public and a metadata address is an attack, not a choice), then answers
 * in the shape asked (`all` for Happy Eyeballs).
 */
function guardedLookup(resolve: Resolver) {
  return (hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void => {
    resolve(hostname).then(
      (found) => {
        for (const { address } of found) {
          const problem = addressProblem(hostname, address);
          // mutant: outbound-lookup-unchecked
          if (problem) return callback(new OutboundRefusedError('address', problem), '');
        }
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0);
        const usable = family === 4 || family === 6 ? found.filter((a) => a.family === family) : found;
        const first = usable[0];
        if (!first) return callback(Object.assign(new Error(`no IPv${family} address for ${hostname}`), { code: 'ENOTFOUND' }), '');
        if (options.all) return callback(null, usable);
        return callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}

/** A connector that refuses a refused IP literal before connecting, and resolves names through guardedLookup. */
function guardedConnector(policy: OutboundPolicy): buildConnector.connector {
  const base = buildConnector({
    lookup: guardedLookup(policy.resolve ?? systemResolve) as never,
    ...(policy.ca ? { ca: policy.ca } : {}),
  });
  return (options, callback) => {
    // mutant: outbound-ip-literal-unchecked
    if (isIP(options.hostname)) {
      const problem = addressProblem(options.hostname, options.hostname);
      if (problem) return callback(new OutboundRefusedError('address', problem), null);
    }
    return base(options, callback);
  };
}

const shared = new Map<string, Dispatcher>();

/** The dispatcher of a policy (one per policy of the defaults, shared by every caller: its connections are pooled). */
export function outboundDispatcher(policy: OutboundPolicy = {}): Dispatcher {
  const plain = policy.resolve === undefined && policy.ca === undefined;
  const key = policy.allowLinkLocal ? 'open' : 'guarded';
  const cached = plain ? shared.get(key) : undefined;
  if (cached) return cached;
  const agent = policy.allowLinkLocal ? new Agent(policy.ca ? { connect: { ca: policy.ca } } : {}) : new Agent({ connect: guardedConnector(policy) });
  if (plain) shared.set(key, agent);
  return agent;
}

/**
 * Checks a URL's host before a process starts using it (a destination, FAILURE_NOTIFY_URL): null
 * when every address it resolves to may be called, else why not. A name that does not resolve
 * now is not a problem here (the call will say so); the connect-time check still applies.
 */
export async function outboundUrlProblem(url: URL, policy: OutboundPolicy = {}): Promise<string | null> {
  if (policy.allowLinkLocal) return null;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host)) return addressProblem(host, host);
  let found: LookupAddress[];
  try {
    found = await (policy.resolve ?? systemResolve)(host);
  } catch {
    return null;
  }
  for (const { address } of found) {
    const problem = addressProblem(host, address);
    if (problem) return problem;
  }
  return null;
}

export interface OutboundRequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
  /** Follow redirects (see the header); default false: a 3xx is returned as the answer. */
  followRedirects?: boolean;
  /** Hops followed at most (default 5). */
  maxRedirects?: number;
  /** Header names (any case) dropped once a redirect leaves the origin; `authorization` and `cookie` always are. */
  originHeaders?: readonly string[];
  /** Every URL called must be on one of these origins (`https://api.paddle.com`); others are refused unsent. */
  allowedOrigins?: readonly string[];
  /** Most bytes of an answer's body; past it reading the body fails (OutboundRefusedError 'too-large'). */
  maxResponseBytes?: number;
  policy?: OutboundPolicy;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
export const DEFAULT_MAX_REDIRECTS = 5;

/** Sends one request under the guard and the redirect policy; resolves with the (last) answer. */
export async function outboundFetch(url: string | URL, init: OutboundRequestInit = {}): Promise<Response> {
  const method = (init.method ?? 'GET').toUpperCase();
  const maxRedirects = init.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const dispatcher = outboundDispatcher(init.policy);
  const dropped = new Set(['authorization', 'cookie', ...(init.originHeaders ?? []).map((h) => h.toLowerCase())]);
  let headers = { ...(init.headers ?? {}) };
  let current = new URL(url);
  for (let hop = 0; ; hop += 1) {
    if (init.allowedOrigins && !init.allowedOrigins.includes(current.origin)) {
      throw new OutboundRefusedError('origin', `${current.origin} is not the API's own origin (${init.allowedOrigins.join(', ')}): not called`);
    }
    const response = await undiciFetch(current, { method, headers, body: init.body, signal: init.signal, redirect: 'manual', dispatcher });
    const location = response.headers.get('location');
    if (!init.followRedirects || !REDIRECTS.has(response.status) || location === null) return capped(response, init.maxResponseBytes);
    await response.body?.cancel().catch(() => {});
    // mutant: redirect-unbounded
    if (hop >= maxRedirects) throw new OutboundRefusedError('redirect', `more than ${maxRedirects} redirects (the last answered ${response.status})`);
    let next: URL;
    try {
      next = new URL(location, current);
    } catch {
      throw new OutboundRefusedError('redirect', `answered ${response.status} with a Location that is not a URL`);
    }
    if (next.protocol !== 'http:' && next.protocol !== 'https:')
      throw new OutboundRefusedError('redirect', `answered ${response.status} towards a ${next.protocol} URL: not followed`);
    if (current.protocol === 'https:' && next.protocol === 'http:')
      throw new OutboundRefusedError('redirect', `answered ${response.status} from https to http (${next.origin}): not followed, it would send the request unencrypted`);
    // mutant: redirect-post-becomes-get
    if (response.status !== 307 && response.status !== 308 && method !== 'GET' && method !== 'HEAD')
      throw new OutboundRefusedError(
        'redirect',
        `answered ${response.status} towards ${next.origin}${next.pathname}: not followed, fetch would resend the ${method} as a GET without its body; only 307 and 308 keep it (fix the URL)`,
      );
    // mutant: redirect-keeps-secret-headers
    if (next.origin !== current.origin) headers = Object.fromEntries(Object.entries(headers).filter(([name]) => !dropped.has(name.toLowerCase())));
    current = next;
  }
}

/** The answer with its body bounded to `max` bytes (the declared length checked first). */
async function capped(response: Response, max: number | undefined): Promise<Response> {
  if (max === undefined || response.body === null) return response;
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  const tooLarge = () => new OutboundRefusedError('too-large', `the answer is larger than ${max} bytes: not read`);
  if (Number.isFinite(declared) && declared > max) {
    await response.body.cancel().catch(() => {});
    throw tooLarge();
  }
  let seen = 0;
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > max) controller.error(tooLarge());
        else controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * outboundFetch as a `fetch` for a provider's own client (Stripe's `createFetchHttpClient`,
 * Octokit's `request.fetch`): the client's redirect mode is kept ('follow' follows under the
 * policy above), everything else comes from `init`.
 */
export function outboundFetchFor(options: Omit<OutboundRequestInit, 'method' | 'headers' | 'body' | 'signal' | 'followRedirects'>): typeof globalThis.fetch {
  const fetchLike = async (input: string | URL | { url: string }, given: RequestInit = {}) => {
    const url = typeof input === 'string' || input instanceof URL ? input : input.url;
    const headers: Record<string, string> = {};
    new Headers(given.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const body = given.body === null || given.body === undefined ? undefined : typeof given.body === 'string' ? given.body : new Uint8Array(given.body as ArrayBuffer);
    return outboundFetch(url, {
      ...options,
      method: given.method,
      headers,
      body,
      signal: given.signal ?? undefined,
      followRedirects: (given.redirect ?? 'follow') === 'follow',
    });
  };
  return fetchLike as unknown as typeof globalThis.fetch;
}
