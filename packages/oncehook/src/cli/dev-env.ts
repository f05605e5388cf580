/**
 * What `oncehook dev` and `oncehook send` add on a developer's machine: a development secret
 * for every built-in provider that has none configured, so that `send` signs with exactly what
 * the local ingest verifies with. Never used by `oncehook ingest` or `oncehook worker`, which
 * refuse to start without the secrets you configure. These values are public: never put them
 * anywhere a real provider delivers to.
 */
import { PROVIDERS } from '@oncehook/providers';

/**
 * Every provider's development secret (for a sender that verifies with a public key, the PUBLIC
 * half of its development key pair), and its URL and verify token where it needs them (the URL
 * `oncehook dev` serves by default), from the provider list.
 */
export const DEV_SECRETS: Readonly<Record<string, string>> = Object.fromEntries(
  PROVIDERS.flatMap((provider) => {
    if (!provider.env) return [];
    return [
      [provider.env.secrets.name, provider.env.secrets.dev],
      ...provider.env.options.flatMap((variable) => (variable.dev === undefined ? [] : [[variable.name, variable.dev]])),
    ];
  }),
);

/** `env` with a development secret for each built-in provider it does not configure. */
export function withDevSecrets(env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const [key, value] of Object.entries(DEV_SECRETS)) if (out[key] === undefined || out[key] === '') out[key] = value;
  return out;
}
