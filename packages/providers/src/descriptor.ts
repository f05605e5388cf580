/**
 * What a provider is, in one shape: everything the rest of Oncehook needs to know about one
 * kind of sender, read from one descriptor. The six adapters (stripe.ts, github.ts, ...) each
 * export theirs beside their verification code; every table sender (senders.ts) gets one from
 * its scheme (sender-descriptor.ts); providers.ts lists them all. Configuration, sources,
 * retention windows, `oncehook dev` / `oncehook send`, the test kit's signer and payloads and
 * the generated docs read that list, and nothing else: a new provider touches its own file and
 * the list (docs/providers.md, "Adding a sender", counts it).
 */
import { z } from 'zod';
import type { ProviderKind } from '@oncehook/sdk';
import type { BackfillApi } from './backfill.js';
import type { ProviderVariable } from './provider-variable.js';
import type { WebhookSource } from './types.js';

export type { ProviderVariable } from './provider-variable.js';

/** A variable that sets an option of the source its secrets declare (`STRIPE_TOLERANCE_SECONDS` -> `toleranceSeconds`). */
export interface OptionVariable extends ProviderVariable {
  /** The option of the source declaration it sets. */
  readonly option: string;
  /** What `oncehook dev` puts there when nothing is configured (a sender's URL, a verify token). */
  readonly dev?: string;
}

/** How a delivery's signer is asked to sign (the test kit's `signedDelivery`, `oncehook send`). */
export interface SignedDeliveryOptions {
  /**
   * The provider's stable event id, where the provider puts it (a header, or the body: it then
   * replaces the payload's own id). Default: the payload's id, else a fresh one. With a JSON
   * string payload (sent byte for byte) a body id cannot be replaced: a different one throws.
   */
  id?: string;
  /**
   * The event type: Stripe/Paddle/Standard Webhooks put it in the body (used when the payload
   * has none); GitHub `event` or `event.action`; Shopify the topic.
   */
  type?: string;
  /** Unix seconds of the signature (default: now). */
  timestamp?: number;
  /** Redelivery number: changes only per-attempt fields (Slack's retry headers). */
  attempt?: number;
  /** GitHub's hook id (default 1). */
  hookId?: string;
  /** Shopify's shop domain (default example.myshopify.com). */
  shopDomain?: string;
  /** The public URL the delivery is posted to, for senders that sign it (HubSpot, Square). */
  url?: string;
  /** Generic HMAC sources: how the source is configured (docs/providers.md). */
  hmac?: {
    signatureHeader: string;
    encoding: 'hex' | 'base64' | 'base64url';
    signaturePrefix?: string;
    timestampHeader?: string;
    idHeader?: string;
    typeHeader?: string;
    /** Headers whose values are signed (after the timestamp, each followed by a dot), in order. */
    signedHeaders?: string[];
  };
}

/** A delivery signed as its provider signs it. */
export interface SignedDelivery {
  body: string;
  headers: Record<string, string>;
  /** The id Oncehook stores for this event (GitHub: `<hook id>:<delivery>`). */
  eventId: string;
}

/** A realistic payload, fresh ids and times on every call. */
export type PayloadBuilder = () => Record<string, unknown>;

/** A configured source's parts a descriptor builds it from: its name, its secrets, its checked options. */
export interface SourceParts {
  name: string;
  secrets: string[];
  options: Record<string, unknown>;
}

export interface ProviderDescriptor {
  readonly kind: ProviderKind;
  readonly title: string;
  /** The provider's documentation of its signatures. */
  readonly docs: string;
  /**
   * The variables that declare its default source (named after the kind): the secrets (set:
   * the source exists), then options (a tolerance, a URL, a verify token). Null for a kind that
   * exists only in ONCEHOOK_SOURCES_FILE (`hmac`).
   */
  readonly env: {
    readonly secrets: ProviderVariable & {
      /** The development secret of `oncehook dev` (public: never where a real provider delivers). */
      readonly dev: string;
    };
    readonly options: readonly OptionVariable[];
  } | null;
  /** How long the provider keeps redelivering on its own (retention must outlast it); null: unknown. */
  readonly redelivery: { readonly days: number; readonly what: string } | null;
  /** The fields a sources-file entry of this kind may carry besides name, kind, secrets, secretsEnv. */
  readonly options: z.ZodRawShape;
  /** The source; throws an Error naming the source when a secret or an option cannot work. */
  create(parts: SourceParts): WebhookSource;
  /** Signs a payload (an object, or a JSON string sent byte for byte) as the provider does. */
  sign(payload: unknown, secret: string, options: SignedDeliveryOptions): SignedDelivery;
  /** Built-in payloads by event type (the first is `oncehook send`'s default). */
  readonly payloads: Readonly<Record<string, PayloadBuilder>>;
  /**
   * For a sender that verifies with a PUBLIC key (SendGrid, Discord): the development key pair;
   * `oncehook send` signs with its private half.
   */
  readonly devKeyPair?: { readonly public: string; readonly private: string };
  /**
   * How to list, from the provider's own API, the events it may have failed to deliver
   * (`oncehook backfill`, backfill.ts); absent for a provider with no such API.
   */
  readonly backfill?: BackfillApi;
}

/**
 * An adapter's descriptor, its options typed from their schema (the shared head of every
 * adapter: the source's name defaults to the kind, its options are checked by `options`).
 */
export function defineAdapter<Shape extends z.ZodRawShape>(
  adapter: Omit<ProviderDescriptor, 'options' | 'create'> & {
    options: Shape;
    create(source: { name: string; secrets: string[] } & z.infer<z.ZodObject<Shape>>): WebhookSource;
  },
): ProviderDescriptor {
  const { create, ...rest } = adapter;
  return { ...rest, create: ({ name, secrets, options }) => create({ ...(options as z.infer<z.ZodObject<Shape>>), name, secrets }) };
}

/** Seconds of signed-timestamp tolerance, in a file entry. */
export const toleranceOption = z.number().int().min(1).max(86_400).optional();

/** The `<KIND>_TOLERANCE_SECONDS` variable of an adapter that checks a signed timestamp. */
export function toleranceVariable(name: string, defaultSeconds: number, why: string): OptionVariable {
  return {
    name,
    option: 'toleranceSeconds',
    schema: z.coerce.number().int().min(1).max(86_400).default(defaultSeconds),
    shown: String(defaultSeconds),
    meaning: `Timestamp tolerance in seconds, both ways (${why})`,
  };
}

/** A provider's comma-separated secrets variable. */
export function secretsVariable(name: string, meaning: string, dev: string): ProviderVariable & { dev: string } {
  return { name, schema: z.string().optional(), shown: 'unset', meaning, dev };
}
