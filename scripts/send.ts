/**
 * `npm run send -- <source> [type] [--copies N] [--concurrent] [--file payload.json] [--id ID] [--url URL]`
 *
 * Signs a test event the way the source's provider signs it, with the secret ingest verifies
 * with (the same configuration: the shell, `.env.local`, the local defaults of `npm start`;
 * scripts/local-env.ts), delivers it to ingest and prints each answer. `--copies 5` delivers
 * the SAME event five times (one `accepted`, four `duplicate`); `--concurrent` sends the copies
 * at the same moment instead of one after the other.
 *
 *   npm run send -- stripe payment_intent.succeeded
 *   npm run send -- stripe payment_intent.succeeded --copies 5 --concurrent
 *   npm run send -- github push
 *   npm run send -- stripe --file my-event.json
 *   npm run send -- --list
 *
 * The payload is a built-in realistic one (@oncehook/testkit `fixture`: Stripe's own CLI
 * trigger fixtures, GitHub, Shopify, ...) or your JSON file. Exit code 0 when every answer was
 * 2xx, 1 otherwise (the answer says why), 2 for a usage mistake.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError } from '@oncehook/sdk';
import { loadIngestConfig, secretsOf, sourceDeclarations, type SourceDeclaration } from '@oncehook/shared';
import { fixture, fixtureTypes, signedDelivery, type DeliveryKind } from '@oncehook/testkit';
import { localEnv } from './local-env';

const USAGE = `usage: npm run send -- <source> [type] [--copies N] [--concurrent] [--file payload.json] [--id ID] [--url URL]
       npm run send -- --list

  <source>      a configured source (stripe, github, shopify, standard-webhooks, slack, paddle, or a name from ONCEHOOK_SOURCES_FILE)
  [type]        the event type; default: the first built-in one of the source's provider (--list shows them)
  --copies N    deliver the same event N times (default 1): the first is accepted, the rest are duplicates
  --concurrent  send the copies at the same moment (default: one after the other)
  --file F      your own JSON payload instead of the built-in one (its id and type are used where the provider puts them in the body)
  --id ID       the event id (default: a fresh one)
  --url URL     ingest's base URL (default http://127.0.0.1:$PORT, PORT default 3000)`;

class UsageError extends Error {}

function kindOf(declaration: SourceDeclaration): DeliveryKind {
  return declaration.kind;
}

function parse() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        copies: { type: 'string' },
        concurrent: { type: 'boolean' },
        file: { type: 'string' },
        id: { type: 'string' },
        url: { type: 'string' },
        list: { type: 'boolean' },
        help: { type: 'boolean' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

async function main(): Promise<number> {
  const parsed = parse();
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }

  const env = localEnv();
  const config = loadIngestConfig(env);
  const declarations = sourceDeclarations(config);
  if (values.list) {
    for (const declaration of declarations) {
      const types = fixtureTypes(kindOf(declaration));
      process.stdout.write(`${declaration.name} (${declaration.kind}): ${types.length ? types.join(', ') : 'no built-in payloads; use --file'}\n`);
    }
    return 0;
  }

  const [sourceName, typeArg, extra] = positionals;
  if (!sourceName) throw new UsageError('say which source to send to');
  if (extra) throw new UsageError(`unexpected argument "${extra}"`);
  const declaration = declarations.find((d) => d.name === sourceName);
  if (!declaration) {
    throw new UsageError(`no source named "${sourceName}" is configured; configured: ${declarations.map((d) => d.name).join(', ') || 'none'}`);
  }
  const kind = kindOf(declaration);
  const copies = values.copies === undefined ? 1 : Number(values.copies);
  if (!Number.isInteger(copies) || copies < 1 || copies > 1000) throw new UsageError(`--copies must be a whole number from 1 to 1000 (got "${values.copies}")`);

  let payload: Record<string, unknown> | string;
  let type = typeArg;
  if (values.file) {
    const text = readFileSync(values.file, 'utf8');
    try {
      JSON.parse(text);
    } catch (error) {
      throw new UsageError(`--file ${values.file} is not JSON: ${(error as Error).message}`);
    }
    payload = text; // sent byte for byte
  } else {
    type ??= fixtureTypes(kind)[0];
    if (!type) throw new UsageError(`no built-in ${kind} payloads: pass your own JSON with --file`);
    try {
      payload = fixture(kind, type);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  if (kind === 'hmac')
    throw new UsageError(`source "${sourceName}" is an in-house HMAC source: sign with @oncehook/testkit signedDelivery('hmac', ..., { hmac: ... }) in a script of yours`);

  const secret = secretsOf(declaration, env)[0]!;
  const base = values.url ?? `http://127.0.0.1:${config.PORT === 0 ? 3000 : config.PORT}`;
  const url = `${base.replace(/\/$/, '')}/webhooks/${sourceName}`;
  // One event: one id, signed afresh for every copy (as a provider's retry is).
  const first = signedDelivery(kind, payload, secret, { id: values.id, type });
  // A copy is the same bytes, signed again (a fresh timestamp where the provider signs one).
  const sign = () => signedDelivery(kind, first.body, secret, { id: kind === 'github' || kind === 'shopify' ? idOf(first) : first.eventId, type });

  process.stdout.write(
    `sending ${copies === 1 ? 'one delivery' : `${copies} deliveries`} of ${sourceName} ${type ?? '(type from the file)'} ${first.eventId} to ${url}${copies > 1 ? (values.concurrent ? ' (at once)' : ' (one after the other)') : ''}\n`,
  );
  const deliver = async (n: number): Promise<boolean> => {
    const delivery = n === 0 ? first : sign();
    try {
      const response = await fetch(url, { method: 'POST', body: delivery.body, headers: delivery.headers });
      const text = await response.text();
      let summary = text;
      try {
        const json = JSON.parse(text) as Record<string, unknown>;
        summary = String(json.status ?? json.error ?? text) + (json.message ? `: ${String(json.message)}` : '');
      } catch {
        // not JSON: print as is
      }
      process.stdout.write(`  #${n + 1} -> ${response.status} ${summary}\n`);
      if (response.status === 401) process.stdout.write(`     (ingest verifies with another secret: give both the same ${secretVariable(declaration)}, e.g. in .env.local)\n`);
      return response.ok;
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
      process.stdout.write(`  #${n + 1} -> no answer (${cause}): is ingest running at ${base}? (npm start)\n`);
      return false;
    }
  };
  const results: boolean[] = [];
  if (values.concurrent) results.push(...(await Promise.all(Array.from({ length: copies }, (_, n) => deliver(n)))));
  else for (let n = 0; n < copies; n += 1) results.push(await deliver(n));
  const ok = results.every(Boolean);
  if (ok) process.stdout.write(`see it: npm run oncehook -- show ${sourceName}/${first.eventId}\n`);
  return ok ? 0 : 1;
}

/** The id a GitHub or Shopify delivery carries in its header (GitHub's stored id adds the hook). */
function idOf(delivery: { eventId: string }): string {
  const colon = delivery.eventId.indexOf(':');
  return colon === -1 ? delivery.eventId : delivery.eventId.slice(colon + 1);
}

function secretVariable(declaration: SourceDeclaration): string {
  if (declaration.secretsEnv) return declaration.secretsEnv;
  const byKind: Record<string, string> = {
    stripe: 'STRIPE_WEBHOOK_SECRET',
    github: 'GITHUB_WEBHOOK_SECRET',
    shopify: 'SHOPIFY_WEBHOOK_SECRET',
    'standard-webhooks': 'STANDARD_WEBHOOKS_SECRET',
    slack: 'SLACK_SIGNING_SECRET',
    paddle: 'PADDLE_WEBHOOK_SECRET',
  };
  return byKind[declaration.kind] ?? 'secret';
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`send: ${error.message}\n${USAGE}\n`);
      process.exit(2);
    }
    if (error instanceof ConfigError) {
      process.stderr.write(`send: ${error.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`send: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
