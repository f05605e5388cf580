/**
 * Every provider Oncehook verifies, in one list: the adapters (a file each, for what a table
 * entry cannot say) and the table senders (senders.ts), each read through one descriptor
 * (descriptor.ts). Sources, configuration, retention windows, `oncehook dev` / `send`, the test
 * kit and the generated docs (`npm run docs:senders`) read this list and nothing else.
 *
 * Adding an adapter: its file (verification, signer, descriptor), its entry in ADAPTERS, its
 * kind in @oncehook/sdk's ADAPTER_KINDS (the type checker asks for it), its oracle case in the
 * harness (providers.ts). Adding a table sender: its file in senders/ (scheme and
 * payloads) and its line in senders.ts, its kind in SENDER_KINDS, its oracle case (sender-cases.ts).
 */
import type { ADAPTER_KINDS, ProviderKind } from '@oncehook/sdk';
import type { ProviderDescriptor, ProviderVariable } from './descriptor.js';
import { GENERIC_HMAC_ADAPTER } from './generic-hmac.js';
import { GITHUB_ADAPTER } from './github.js';
import { PADDLE_ADAPTER } from './paddle.js';
import { senderDescriptor } from './sender-descriptor.js';
import { SENDER_SCHEMES } from './senders.js';
import { SHOPIFY_ADAPTER } from './shopify.js';
import { SLACK_ADAPTER } from './slack.js';
import { STANDARD_WEBHOOKS_ADAPTER } from './standard-webhooks.js';
import { STRIPE_ADAPTER } from './stripe.js';

/** The adapters, by kind, in the order their variables are read and documented. */
export const ADAPTERS: Readonly<Record<(typeof ADAPTER_KINDS)[number], ProviderDescriptor>> = {
  stripe: STRIPE_ADAPTER,
  github: GITHUB_ADAPTER,
  shopify: SHOPIFY_ADAPTER,
  'standard-webhooks': STANDARD_WEBHOOKS_ADAPTER,
  slack: SLACK_ADAPTER,
  paddle: PADDLE_ADAPTER,
  hmac: GENERIC_HMAC_ADAPTER,
};

/** Every provider: the adapters, then the table senders. */
export const PROVIDERS: readonly ProviderDescriptor[] = [...Object.values(ADAPTERS), ...Object.values(SENDER_SCHEMES).map(senderDescriptor)];

const BY_KIND = new Map<string, ProviderDescriptor>(PROVIDERS.map((provider) => [provider.kind, provider]));

/** The descriptor of a kind; throws for a kind Oncehook does not know (a source's kind is checked before). */
export function providerOf(kind: ProviderKind | string): ProviderDescriptor {
  const provider = BY_KIND.get(kind);
  if (!provider) throw new Error(`unknown provider kind "${kind}"; known: ${[...BY_KIND.keys()].join(', ')}`);
  return provider;
}

/** Every provider's environment variables, in the list's order (the README's table, config). */
export const PROVIDER_VARIABLES: readonly ProviderVariable[] = PROVIDERS.flatMap((provider) => (provider.env ? [provider.env.secrets, ...provider.env.options] : []));

/** The kinds whose provider's API lists the events it failed to deliver (`oncehook backfill`, BACKFILL_SCHEDULE). */
export const BACKFILL_KINDS: readonly string[] = PROVIDERS.filter((provider) => provider.backfill).map((provider) => provider.kind);

/** The variables of the providers' APIs that `oncehook backfill` reads (a read key, a base URL); no service reads them. */
export const BACKFILL_VARIABLES: readonly ProviderVariable[] = PROVIDERS.flatMap((provider) => provider.backfill?.env ?? []);
