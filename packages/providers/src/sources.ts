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
import { ConfigError, type ProviderKind } from '@oncehook/sdk';
import type { Env } from '@oncehook/shared';
import { retentionProblems } from './retention.js';
import { PROVIDERS, providerOf } from './providers.js';
import { isSenderKind } from './senders.js';
import type { WebhookSource } from './types.js';

export { PROVIDER_KINDS } from '@oncehook/sdk';

export function splitSecrets(value: string): string[] {
  return value
    .split(',')
    .map((secret) => secret.trim())
    .filter(Boolean);
}

const sourceName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'a source name is 1-63 characters of a-z 0-9 _ - (it is the URL segment and the dedupe namespace)');
const common = {
  name: sourceName,
  /** Secrets inline (fine for tests; prefer secretsEnv). */
  secrets: z.array(z.string().min(1)).optional(),
  /** Name of an environment variable holding comma-separated secrets. */
  secretsEnv: z.string().optional(),
};

/** One entry per provider kind: the common fields and the options its descriptor declares. */
const entrySchemas = PROVIDERS.map((provider) => z.object({ ...common, kind: z.literal(provider.kind), ...provider.options }).strict());
const entrySchema = z.discriminatedUnion('kind', entrySchemas as [(typeof entrySchemas)[number], ...(typeof entrySchemas)[number][]]);
const fileSchema = z.object({ sources: z.array(entrySchema) });

/**
 * A declared source: its name, kind and secrets (inline or from a variable), and the options
 * of its kind (the provider's descriptor says which: `toleranceSeconds`, `bodyDedupe`, `url`, ...).
 */
export interface SourceDeclaration {
  name: string;
  kind: ProviderKind;
  secrets?: string[];
  secretsEnv?: string;
  [option: string]: unknown;
}

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

/** Builds one source from its declaration, its options checked by its kind's schema. */
export function createSource(declaration: SourceDeclaration, env: Env = process.env): WebhookSource {
  const checked = entrySchema.safeParse(declaration);
  if (!checked.success) {
    const lines = checked.error.issues.map((issue) => `  ${issue.path.join('.') || '(root)'}: ${issue.message}`);
    throw new ConfigError(`source ${String(declaration.name)} is invalid:\n${lines.join('\n')}`);
  }
  const secrets = secretsOf(declaration, env);
  const { name, kind, secrets: _inline, secretsEnv: _variable, ...options } = checked.data;
  try {
    return providerOf(kind).create({ name, secrets, options });
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

/**
 * What the sources are read from: the ingest configuration's part that declares them (the
 * `oncehook` package's IngestConfig has it all).
 */
export interface SourceSettings {
  /** Every provider's variables, parsed by its descriptor (providers.ts); unset ones absent. */
  readonly providerVariables: Readonly<Record<string, unknown>>;
  ONCEHOOK_SOURCES_FILE?: string | undefined;
  RETENTION_DAYS: number;
  RETENTION_OVERRIDES: Record<string, number>;
  KEY_RETENTION_DAYS: number;
}

/**
 * Sources declared by the provider-named environment variables (docs/providers.md): each
 * provider's secrets variable, set, declares a source named after its kind, with the options
 * its other variables set (a tolerance, a URL, a verify token), as the ingest configuration parsed them.
 */
function envDeclarations(config: SourceSettings): SourceDeclaration[] {
  const declarations: SourceDeclaration[] = [];
  for (const provider of PROVIDERS) {
    if (!provider.env) continue;
    const value = config.providerVariables[provider.env.secrets.name];
    if (typeof value !== 'string' || value === '') continue;
    const options: Record<string, unknown> = {};
    for (const variable of provider.env.options) {
      if (config.providerVariables[variable.name] !== undefined) options[variable.option] = config.providerVariables[variable.name];
    }
    declarations.push({ name: provider.kind, kind: provider.kind, secrets: splitSecrets(value), ...options });
  }
  return declarations;
}

/**
 * Every source the configuration declares (the provider-named variables, then
 * ONCEHOOK_SOURCES_FILE), names unique. `npm run send` reads them to sign as ingest verifies.
 */
export function sourceDeclarations(config: SourceSettings): SourceDeclaration[] {
  const declarations = envDeclarations(config);
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

export function sourcesFromConfig(config: SourceSettings, env: Env = process.env): Map<string, WebhookSource> {
  const sources = new Map<string, WebhookSource>();
  for (const declaration of sourceDeclarations(config)) sources.set(declaration.name, createSource(declaration, env));
  const tooShort = retentionProblems({ defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES, keyDays: config.KEY_RETENTION_DAYS }, [...sources.values()]);
  // mutant: retention-window-unchecked
  if (tooShort.length > 0) throw new ConfigError(`Retention shorter than a provider's redelivery window:\n  ${tooShort.join('\n  ')}`);
  if (sources.size === 0) {
    const adapters = PROVIDERS.filter((provider) => provider.env && !isSenderKind(provider.kind)).map((provider) => provider.env?.secrets.name);
    throw new ConfigError(
      `No webhook source is configured: set ${adapters.join(', ')}, a sender's variable (LINEAR_WEBHOOK_SECRET, ...: docs/providers.md lists them) or ONCEHOOK_SOURCES_FILE.`,
    );
  }
  return sources;
}
