/**
 * The destinations as operators see them (the admin API and page, `oncehook destinations`):
 * where (origin and path: never a secret, a query string or a configured header), what they
 * take, their limits, and how each is doing (runs in flight, waiting, dead letters, a pause,
 * the last error). One owner, so the command and the page never disagree.
 */
import type { Destination } from './destination-config.js';
import type { Operations } from '../operations.js';

export interface DestinationState {
  name: string;
  url: string;
  sources: string[];
  types: string[];
  /** The payload paths its filter reads. */
  filter: string[];
  concurrency: Destination['concurrency'] | null;
  rateLimit: Destination['rateLimit'] | null;
  retries: Destination['retries'] | null;
  circuitBreaker: Destination['circuitBreaker'] | null;
  /** `v1` (HMAC), and `v1a` (ed25519) when it has a signing key. */
  signatures: ('v1' | 'v1a')[];
  inFlight: number;
  waiting: number;
  deadLetters: number;
  paused: string | null;
  lastError: string | null;
}

export async function destinationStates(ops: Pick<Operations, 'handlerStates'>, destinations: readonly Destination[]): Promise<DestinationState[]> {
  const states = await ops.handlerStates(destinations.map((d) => d.name));
  return destinations.map((d) => {
    const state = states.find((s) => s.handler === d.name);
    return {
      name: d.name,
      url: `${d.url.origin}${d.url.pathname}`,
      sources: d.sources,
      types: d.types,
      filter: d.filter.map((f) => f.path),
      concurrency: d.concurrency ?? null,
      rateLimit: d.rateLimit ?? null,
      retries: d.retries ?? null,
      circuitBreaker: d.circuitBreaker ?? null,
      signatures: d.signingKey ? ['v1', 'v1a'] : ['v1'],
      inFlight: state?.inFlight ?? 0,
      waiting: state?.waiting ?? 0,
      deadLetters: state?.failed ?? 0,
      paused: state?.paused ?? null,
      lastError: state?.lastError ?? null,
    };
  });
}
