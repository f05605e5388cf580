/**
 * The environment of `npm start`, `npm run send` and `npm run demo` on a developer's machine:
 * what the shell exports wins, then `.env.local` (if there is one; KEY=value lines, never
 * committed), then the local development defaults below. One place, so the secrets ingest
 * verifies with under `npm start` are the ones `npm run send` signs with.
 *
 * Put the secret `stripe listen` prints in `.env.local` (STRIPE_WEBHOOK_SECRET=whsec_...) and
 * both commands use it. Never used by the Docker image or compose (they read `.env`).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Development-only secrets, one per built-in provider (never use them anywhere else). */
export const LOCAL_DEFAULTS: Readonly<Record<string, string>> = {
  STRIPE_WEBHOOK_SECRET: 'whsec_local_development_secret',
  GITHUB_WEBHOOK_SECRET: 'local-development-github-secret',
  SHOPIFY_WEBHOOK_SECRET: 'local-development-shopify-secret',
  STANDARD_WEBHOOKS_SECRET: `whsec_${Buffer.from('local-development-standard-key').toString('base64')}`,
  SLACK_SIGNING_SECRET: 'local-development-slack-secret',
  PADDLE_WEBHOOK_SECRET: 'pdl_ntfset_local_development_secret',
};

export const LOCAL_ENV_FILE = '.env.local';

/** The shell's environment over `.env.local` over the defaults. */
export function localEnv(shell: NodeJS.ProcessEnv = process.env, root = ROOT): Record<string, string> {
  const file = path.join(root, LOCAL_ENV_FILE);
  const fromFile = existsSync(file) ? parseEnv(readFileSync(file, 'utf8')) : {};
  const merged: Record<string, string> = { ...LOCAL_DEFAULTS };
  for (const source of [fromFile, shell]) {
    for (const [key, value] of Object.entries(source)) if (value !== undefined) merged[key] = value;
  }
  return merged;
}
