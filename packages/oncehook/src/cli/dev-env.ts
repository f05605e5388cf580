/**
 * What `oncehook dev` and `oncehook send` add on a developer's machine: a development secret
 * for every built-in provider that has none configured, so that `send` signs with exactly what
 * the local ingest verifies with. Never used by `oncehook ingest` or `oncehook worker`, which
 * refuse to start without the secrets you configure. These values are public: never put them
 * anywhere a real provider delivers to.
 */
export const DEV_SECRETS: Readonly<Record<string, string>> = {
  STRIPE_WEBHOOK_SECRET: 'whsec_local_development_secret',
  GITHUB_WEBHOOK_SECRET: 'local-development-github-secret',
  SHOPIFY_WEBHOOK_SECRET: 'local-development-shopify-secret',
  STANDARD_WEBHOOKS_SECRET: `whsec_${Buffer.from('local-development-standard-key').toString('base64')}`,
  SLACK_SIGNING_SECRET: 'local-development-slack-secret',
  PADDLE_WEBHOOK_SECRET: 'pdl_ntfset_local_development_secret',
};

/** `env` with a development secret for each built-in provider it does not configure. */
export function withDevSecrets(env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const [key, value] of Object.entries(DEV_SECRETS)) if (out[key] === undefined || out[key] === '') out[key] = value;
  return out;
}
