/**
 * The test oracle's shape of one provider: a realistic payload, a signer written from the
 * provider's documentation (independent of Oncehook's own signers), the id Oncehook must store.
 * providers.ts holds the adapters' cases, sender-cases.ts the table senders'.
 */
import type { Delivery } from './net.js';

export interface SignOptions {
  /** The stable id (body id or header, as the provider puts it). */
  id: string;
  secret?: string;
  /** Unix seconds of the signature (providers that sign one). */
  timestamp?: number;
  /** Redelivery number: changes only the per-attempt fields. */
  attempt?: number;
}

export interface ProviderCase {
  source: string;
  /** A realistic payload for this id. */
  body(id: string): string;
  sign(body: string | Buffer, options: SignOptions): Promise<Delivery>;
  /** The event id Oncehook stores for this delivery. */
  storedId(id: string): string;
  type: string;
  timestamped: boolean;
}
