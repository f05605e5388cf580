/**
 * `oncehook destinations`: the configured destinations (docs/destinations.md) and how each is
 * doing: calls in flight, runs waiting and why, dead letters, paused or not, the last error.
 * `--new-secret` and `--new-signing-key` make the keys a destination and its receiver share.
 * Secrets are never printed, except the ones it was asked to make.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { destinationStates, type DestinationState, destinationPublicKey, loadDestinations } from '@oncehook/core';
import { type Command, UsageError } from './command.js';
import { withOperations } from './connections.js';
import { terminalSafe, writeOut } from './terminal.js';

/** Three lines per destination: where and what it takes, its signatures and limits, how it is doing. */
function describe(r: DestinationState): string {
  const limits = Object.fromEntries(
    Object.entries({ concurrency: r.concurrency, rateLimit: r.rateLimit, retries: r.retries, circuitBreaker: r.circuitBreaker }).filter(([, value]) => value !== null),
  );
  const signs = r.signatures.includes('v1a') ? 'v1 (HMAC), v1a (ed25519)' : 'v1 (HMAC)';
  return `${r.name}  -> ${r.url}\n  takes ${r.sources.join(', ')} ${r.types.join(', ')}${r.filter.length ? ` (${r.filter.length} filter condition(s))` : ''}; signs ${signs}${
    Object.keys(limits).length ? `; ${JSON.stringify(limits)}` : ''
  }\n  ${r.paused ? `PAUSED (${r.paused}); ` : ''}${r.inFlight} in flight, ${r.waiting} waiting, ${r.deadLetters} dead letter(s)${r.lastError ? `\n  last error: ${r.lastError}` : ''}\n`;
}

function options(args: string[]) {
  try {
    return parseArgs({ args, options: { json: { type: 'boolean' }, 'new-secret': { type: 'boolean' }, 'new-signing-key': { type: 'boolean' } } }).values;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export const destinationsCommand: Command = {
  name: 'destinations',
  summary: 'the destinations events are forwarded to, and how each is doing',
  usage: 'oncehook destinations [--json] | --new-secret | --new-signing-key',
  help: `Lists the destinations of this environment (DESTINATION_URL ..., ONCEHOOK_DESTINATIONS_FILE,
the sources file's "destinations"): what each takes, where it sends (never its secrets), its
limits, and from the database: calls in flight, runs waiting (and why), dead letters, whether
it is paused, its last error. Pause one like a handler: oncehook pause destination <name>.
--new-secret prints a new signing secret (whsec_...: the destination's secretEnv and its
receiver both get it). --new-signing-key prints an ed25519 pair: whsk_... (the destination's
signingKeyEnv) and whpk_... (its receiver verifies v1a signatures with it).`,
  usesDevSession: true,
  async run(args, { env }) {
    const values = options(args);
    if (values['new-secret']) {
      process.stdout.write(`whsec_${randomBytes(32).toString('base64')}\n`);
      return 0;
    }
    if (values['new-signing-key']) {
      const { privateKey } = generateKeyPairSync('ed25519');
      const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(-32);
      process.stdout.write(`signingKeyEnv (Oncehook):  whsk_${seed.toString('base64')}\npublic key (the receiver): ${destinationPublicKey(privateKey)}\n`);
      return 0;
    }
    const destinations = loadDestinations(env);
    if (destinations.length === 0) {
      process.stdout.write('no destination configured (DESTINATION_URL, ONCEHOOK_DESTINATIONS_FILE, or "destinations" in the sources file: docs/destinations.md)\n');
      return 0;
    }
    return withOperations(env, async ({ ops }) => {
      const rows = await destinationStates(ops, destinations);
      if (values.json) writeOut(JSON.stringify(rows, null, 2));
      else for (const r of rows) process.stdout.write(terminalSafe(describe(r)));
      return 0;
    });
  },
};
