/**
 * What `oncehook dev` and `oncehook send` add on a developer's machine: a development secret
 * for every built-in provider that has none configured, so that `send` signs with exactly what
 * the local ingest verifies with. Never used by `oncehook ingest` or `oncehook worker`, which
 * refuse to start without the secrets you configure. These values are public: never put them
 * anywhere a real provider delivers to.
 */
import { SENDER_SCHEMES, senderVariables } from '@oncehook/shared';

export const DEV_SECRETS: Readonly<Record<string, string>> = {
  STRIPE_WEBHOOK_SECRET: 'whsec_local_development_secret',
  // Every table sender (senders.ts): its development secret, or the PUBLIC half of its dev key
  // pair; its URL and verify token where it needs them (the URL `oncehook dev` serves by default).
  ...Object.fromEntries(
    Object.values(SENDER_SCHEMES).flatMap((scheme) => {
      const variables = senderVariables(scheme);
      return [
        [variables.secrets, typeof scheme.dev === 'string' ? scheme.dev : scheme.dev.public],
        ...(variables.url ? [[variables.url, `http://127.0.0.1:3000/webhooks/${scheme.kind}`]] : []),
        ...(variables.verifyToken ? [[variables.verifyToken, `local-development-${scheme.kind}-verify-token`]] : []),
      ];
    }),
  ),
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
