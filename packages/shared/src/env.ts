/** Reading the environment: what "unset" means, shared by every reader of variables. */

/** An environment to read the configuration from (process.env by default). */
export type Env = Record<string, string | undefined>;

/** The environment without its empty values: empty means "unset" (docker-compose passes `FOO=` for undefined variables). */
export function withoutEmpty(env: Env): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''));
}
