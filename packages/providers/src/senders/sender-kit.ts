/**
 * What a table sender's file is made of (one file per sender in this folder, listed in
 * ../senders.ts): its scheme (../scheme-spec.ts says what each field means) and its payloads,
 * shaped as its documentation shows them, ids and times fresh on every call. A batch sender's
 * payload is ONE element (the signer wraps it in the array), except Meta's, which is the whole
 * delivery.
 */
import { randomBytes } from 'node:crypto';
import type { SenderScheme } from '../scheme.js';

/** A payload of one event type, built fresh on every call. */
export type PayloadBuilder = () => Record<string, unknown>;

export interface TableSender {
  scheme: SenderScheme;
  /** By event type: `oncehook send <source> <type>` and the test kit's fixtures. */
  payloads: Record<string, PayloadBuilder>;
}

/** A redelivery horizon: how long the sender may still deliver an event, and why. */
export const DAY = (days: number, what: string) => ({ days, what });
export const now = () => Math.floor(Date.now() / 1000);
export const iso = () => new Date().toISOString();
export const hex = (n: number) => randomBytes(n).toString('hex');
