/**
 * Builds the configured sources (name -> WebhookSource), once at start.
 *
 * Two ways to declare them, usable together:
 * - environment variables for the common case: one source per provider, named after it
 *   (STRIPE_WEBHOOK_SECRET -> /webhooks/stripe, GITHUB_WEBHOOK_SECRET -> /webhooks/github, ...);
 * - ONCEHOOK_SOURCES_FILE, a JSON file for many named sources (two Stripe accounts, several
 *   Standard Webhooks senders, in-house HMAC senders), each its own dedupe namespace.
 * Secrets are comma-separated lists: during a rotation, any listed secret verifies.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { IngestConfig } from '../config.js';
import { ConfigError } from '@oncehook/sdk';
import { retentionProblems } from '../retention.js';
import { createGenericHmacSource } from './generic-hmac.js';
import { createGitHubSource } from './github.js';
import { createPaddleSource } from './paddle.js';
import { createShopifySource } from './shopify.js';
import { createSlackSource } from './slack.js';
import { createStandardWebhooksSource } from './standard-webhooks.js';
import { createStripeSource } from './stripe.js';
import { createSchemeSource, type SenderScheme } from './scheme.js';
import { SENDER_KIND_LIST, SENDER_SCHEMES } from './senders.js';
import type { WebhookSource } from './types.js';
import { PROVIDER_KINDS, type SenderKind } from '@oncehook/sdk';

export { PROVIDER_KINDS };

/**
 * The variables of a table sender: its secrets (the entry's `env`); `<KIND>_WEBHOOK_URL` where
 * the sender signs the URL it posts to; `<KIND>_VERIFY_TOKEN` where it checks the endpoint with a GET.
 */
export function senderVariables(scheme: SenderScheme): { secrets: string; url?: string; verifyToken?: string } {
  const prefix = scheme.kind.toUpperCase().replace(/-/g, '_');
  const signsUrl = 'signed' in scheme.signature && scheme.signature.signed.includes('url');
  return { secrets: scheme.env, ...(signsUrl ? { url: `${prefix}_WEBHOOK_URL` } : {}), ...(scheme.get ? { verifyToken: `${prefix}_VERIFY_TOKEN` } : {}) };
}

export function splitSecrets(value: string): string[] {
  return value
    .split(',')
    .map((secret) => secret.trim())
    .filter(Boolean);
}

const sourceName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'a source name is 1-63 characters of a-z 0-9 _ - (it is the URL segment and the dedupe namespace)');
const tolerance = z.number().int().min(1).max(86_400).optional();
const location = z.union([z.object({ header: z.string().min(1) }).strict(), z.object({ field: z.string().min(1) }).strict()]);
const common = {
  name: sourceName,
  /** Secrets inline (fine for tests; prefer secretsEnv). */
  secrets: z.array(z.string().min(1)).optional(),
  /** Name of an environment variable holding comma-separated secrets. */
  secretsEnv: z.string().optional(),
};

const fileSchema = z.object({
  sources: z.array(
    z.discriminatedUnion('kind', [
      z.object({ ...common, kind: z.literal('stripe'), toleranceSeconds: tolerance }).strict(),
      z.object({ ...common, kind: z.literal('github'), bodyDedupe: z.boolean().optional() }).strict(),
      z.object({ ...common, kind: z.literal('shopify'), bodyDedupe: z.enum(['any-topic', 'per-topic', 'off']).optional() }).strict(),
      z.object({ ...common, kind: z.literal('standard-webhooks'), toleranceSeconds: tolerance }).strict(),
      z.object({ ...common, kind: z.literal('slack'), toleranceSeconds: tolerance }).strict(),
      z.object({ ...common, kind: z.literal('paddle'), toleranceSeconds: tolerance }).strict(),
      z
        .object({
          ...common,
          kind: z.enum(SENDER_KIND_LIST as [SenderKind, ...SenderKind[]]),
          toleranceSeconds: tolerance,
          /** The public URL the sender posts to (HubSpot, Square sign it). */
          url: z.string().url().optional(),
          /** Meta's verify token (the GET subscription check). */
          verifyToken: z.string().min(1).optional(),
        })
        .strict(),
      z
        .object({
          ...common,
          kind: z.literal('hmac'),
          signatureHeader: z.string().min(1),
          encoding: z.enum(['hex', 'base64', 'base64url']),
          signaturePrefix: z.string().optional(),
          timestampHeader: z.string().optional(),
          signedHeaders: z.array(z.string().min(1)).optional(),
          bodyDedupe: z.boolean().optional(),
          toleranceSeconds: tolerance,
          id: location,
          type: z.union([location, z.object({ value: z.string().min(1) }).strict()]).optional(),
        })
        .strict(),
    ]),
  ),
});

export type SourceDeclaration = z.infer<typeof fileSchema>['sources'][number];

type Env = Record<string, string | undefined>;

/** A declaration's secrets (inline, or from its secretsEnv variable). */
export function secretsOf(declaration: SourceDeclaration, env: Env = process.env): string[] {
  if (declaration.secrets && declaration.secretsEnv) throw new ConfigError(`source ${declaration.name}: give secrets or secretsEnv, not both`);
  if (declaration.secretsEnv) {
    const value = env[declaration.secretsEnv];
    if (!value) throw new ConfigError(`source ${declaration.name}: environment variable ${declaration.secretsEnv} (secretsEnv) is not set`);
    return splitSecrets(value);
  }
  if (!declaration.secrets?.length) throw new ConfigError(`source ${declaration.name}: no secrets (set secrets or secretsEnv)`);
  return declaration.secrets;
}

/** Builds one source from its declaration. */
export function createSource(declaration: SourceDeclaration, env: Env = process.env): WebhookSource {
  const secrets = secretsOf(declaration, env);
  const { name } = declaration;
  try {
    switch (declaration.kind) {
      case 'stripe':
        return createStripeSource({ name, secrets, toleranceSeconds: declaration.toleranceSeconds });
      case 'github':
        return createGitHubSource({ name, secrets, bodyDedupe: declaration.bodyDedupe });
      case 'shopify':
        return createShopifySource({ name, secrets, bodyDedupe: declaration.bodyDedupe });
      case 'standard-webhooks':
        return createStandardWebhooksSource({ name, secrets, toleranceSeconds: declaration.toleranceSeconds });
      case 'slack':
        return createSlackSource({ name, secrets, toleranceSeconds: declaration.toleranceSeconds });
      case 'paddle':
        return createPaddleSource({ name, secrets, toleranceSeconds: declaration.toleranceSeconds });
      case 'hmac':
        return createGenericHmacSource({ ...declaration, secrets });
      default:
        return createSchemeSource(SENDER_SCHEMES[declaration.kind], {
          name,
          secrets,
          toleranceSeconds: declaration.toleranceSeconds,
          url: declaration.url,
          verifyToken: declaration.verifyToken,
        });
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError((error as Error).message);
  }
}

/** Parses a sources file's JSON text; the error names the file and every bad field. */
export function parseSourcesFile(text: string, where: string): SourceDeclaration[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${where} is not valid JSON: ${(error as Error).message}`);
  }
  const result = fileSchema.safeParse(json);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(root)'}: ${issue.message}`);
    throw new ConfigError(`${where} is invalid:\n${lines.join('\n')}`);
  }
  return result.data.sources;
}

/** Sources declared by the provider-named environment variables. */
function envDeclarations(config: IngestConfig, env: Env): SourceDeclaration[] {
  const declarations: SourceDeclaration[] = [];
  const add = (value: string | undefined, declare: (secrets: string[]) => SourceDeclaration) => {
    if (value) declarations.push(declare(splitSecrets(value)));
  };
  add(config.STRIPE_WEBHOOK_SECRET, (secrets) => ({ name: 'stripe', kind: 'stripe', secrets, toleranceSeconds: config.STRIPE_TOLERANCE_SECONDS }));
  add(config.GITHUB_WEBHOOK_SECRET, (secrets) => ({ name: 'github', kind: 'github', secrets }));
  add(config.SHOPIFY_WEBHOOK_SECRET, (secrets) => ({ name: 'shopify', kind: 'shopify', secrets }));
  add(config.STANDARD_WEBHOOKS_SECRET, (secrets) => ({
    name: 'standard-webhooks',
    kind: 'standard-webhooks',
    secrets,
    toleranceSeconds: config.STANDARD_WEBHOOKS_TOLERANCE_SECONDS,
  }));
  add(config.SLACK_SIGNING_SECRET, (secrets) => ({ name: 'slack', kind: 'slack', secrets, toleranceSeconds: config.SLACK_TOLERANCE_SECONDS }));
  add(config.PADDLE_WEBHOOK_SECRET, (secrets) => ({ name: 'paddle', kind: 'paddle', secrets, toleranceSeconds: config.PADDLE_TOLERANCE_SECONDS }));
  // The table senders: <SENDER>_... variables named by each entry (docs/providers.md).
  for (const kind of SENDER_KIND_LIST) {
    const variables = senderVariables(SENDER_SCHEMES[kind]);
    add(env[variables.secrets], (secrets) => ({
      name: kind,
      kind,
      secrets,
      ...(variables.url && env[variables.url] ? { url: env[variables.url] } : {}),
      ...(variables.verifyToken && env[variables.verifyToken] ? { verifyToken: env[variables.verifyToken] } : {}),
    }));
  }
  return declarations;
}

/**
 * Every source the configuration declares (the provider-named variables, then
 * ONCEHOOK_SOURCES_FILE), names unique. `npm run send` reads them to sign as ingest verifies.
 */
export function sourceDeclarations(config: IngestConfig, env: Env = process.env): SourceDeclaration[] {
  const declarations = envDeclarations(config, env);
  if (config.ONCEHOOK_SOURCES_FILE) {
    let text: string;
    try {
      text = readFileSync(config.ONCEHOOK_SOURCES_FILE, 'utf8');
    } catch (error) {
      throw new ConfigError(`ONCEHOOK_SOURCES_FILE: cannot read ${config.ONCEHOOK_SOURCES_FILE}: ${(error as Error).message}`);
    }
    declarations.push(...parseSourcesFile(text, `ONCEHOOK_SOURCES_FILE (${config.ONCEHOOK_SOURCES_FILE})`));
  }
  const seen = new Set<string>();
  for (const declaration of declarations) {
    if (seen.has(declaration.name)) {
      throw new ConfigError(`source "${declaration.name}" is declared twice (environment and/or ONCEHOOK_SOURCES_FILE); names must be unique`);
    }
    seen.add(declaration.name);
  }
  return declarations;
}

export function sourcesFromConfig(config: IngestConfig, env: Env = process.env): Map<string, WebhookSource> {
  const sources = new Map<string, WebhookSource>();
  for (const declaration of sourceDeclarations(config, env)) sources.set(declaration.name, createSource(declaration, env));
  const tooShort = retentionProblems({ defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES, keyDays: config.KEY_RETENTION_DAYS }, [...sources.values()]);
  if (tooShort.length > 0) throw new ConfigError(`Retention shorter than a provider's redelivery window:\n  ${tooShort.join('\n  ')}`);
  if (sources.size === 0) {
    throw new ConfigError(
      "No webhook source is configured: set STRIPE_WEBHOOK_SECRET, GITHUB_WEBHOOK_SECRET, SHOPIFY_WEBHOOK_SECRET, STANDARD_WEBHOOKS_SECRET, SLACK_SIGNING_SECRET, PADDLE_WEBHOOK_SECRET, a sender's variable (LINEAR_WEBHOOK_SECRET, ...: docs/providers.md lists them) or ONCEHOOK_SOURCES_FILE.",
    );
  }
  return sources;
}
