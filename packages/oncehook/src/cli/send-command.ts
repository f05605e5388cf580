/**
 * `oncehook send <source> [type] [--copies N] [--concurrent] [--file payload.json] [--id ID] [--url URL]`,
 * `oncehook send --all [--copies N]`
 *
 * Signs a test event the way the source's provider signs it, with the secret ingest verifies
 * with (the same environment: the shell, .env.local, .env, and under `oncehook dev` the
 * development secrets of dev-env.ts), delivers it to ingest and prints each answer. `--copies 5`
 * delivers the SAME event five times (one `accepted`, four `duplicate`); `--concurrent` sends
 * the copies at the same moment; `--all` sends every configured source its first built-in
 * payload. The payload is a built-in realistic one (@oncehook/providers `fixture`: Stripe's own CLI trigger fixtures, GitHub, Shopify, ...) or your JSON file. Exit
 * code 0 when every answer was 2xx, 1 otherwise (the answer says why), 2 for a usage mistake.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fixture, fixtureTypes, providerOf, secretsOf, signedDelivery, sourceDeclarations, type DeliveryKind, type SourceDeclaration } from '@oncehook/providers';
import { loadIngestConfig } from '../config.js';
import { type Command, invocation, UsageError } from './command.js';
import { withDevSecrets } from './dev-env.js';
import { writeOut } from './terminal.js';

function kindOf(declaration: SourceDeclaration): DeliveryKind {
  return declaration.kind;
}

function parse(args: string[]) {
  try {
    return parseArgs({
      args,
      allowPositionals: true,
      options: {
        copies: { type: 'string' },
        concurrent: { type: 'boolean' },
        file: { type: 'string' },
        id: { type: 'string' },
        url: { type: 'string' },
        list: { type: 'boolean' },
        all: { type: 'boolean' },
        help: { type: 'boolean' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

async function send(args: string[], shell: Record<string, string>): Promise<number> {
  const { values, positionals } = parse(args);
  const env = withDevSecrets(shell);
  const config = loadIngestConfig(env);
  const declarations = sourceDeclarations(config);
  if (values.list) {
    for (const declaration of declarations) {
      const types = fixtureTypes(kindOf(declaration));
      process.stdout.write(`${declaration.name} (${declaration.kind}): ${types.length ? types.join(', ') : 'no built-in payloads; use --file'}\n`);
    }
    return 0;
  }
  const copies = values.copies === undefined ? 1 : Number(values.copies);
  if (!Number.isInteger(copies) || copies < 1 || copies > 1000) throw new UsageError(`--copies must be a whole number from 1 to 1000 (got "${values.copies}")`);
  const base = values.url ?? env.ONCEHOOK_DEV_URL ?? `http://127.0.0.1:${config.PORT === 0 ? 3000 : config.PORT}`;
  if (values.all) {
    if (positionals.length > 0 || values.file || values.id)
      throw new UsageError('--all sends every source its first built-in payload: give no source, type, --file or --id with it');
    // Every source with a built-in payload, one after the other (an in-house HMAC source has none).
    const sendable = declarations.filter((d) => kindOf(d) !== 'hmac' && fixtureTypes(kindOf(d)).length > 0);
    const failed: string[] = [];
    for (const declaration of sendable) {
      const type = fixtureTypes(kindOf(declaration))[0]!;
      const ok = await sendEvent({ declaration, env, shell, base, type, payload: fixture(kindOf(declaration), type), copies, concurrent: values.concurrent === true }).catch(
        (error: unknown) => {
          if (!(error instanceof UsageError)) throw error;
          writeOut(`${declaration.name}: not sent: ${error.message}`);
          return false;
        },
      );
      if (!ok) failed.push(declaration.name);
    }
    process.stdout.write(
      failed.length === 0
        ? `sent ${sendable.length} sources, every delivery answered 2xx
`
        : `sent ${sendable.length} sources; not every delivery of ${failed.join(', ')} was answered 2xx
`,
    );
    return failed.length === 0 ? 0 : 1;
  }

  const [sourceName, typeArg, extra] = positionals;
  if (!sourceName)
    throw new UsageError(
      `say which source to send to, before the type or --file (oncehook send stripe --file event.json); configured: ${declarations.map((d) => d.name).join(', ') || 'none'}`,
    );
  if (extra) throw new UsageError(`unexpected argument "${extra}"`);
  const declaration = declarations.find((d) => d.name === sourceName);
  if (!declaration) {
    throw new UsageError(`no source named "${sourceName}" is configured; configured: ${declarations.map((d) => d.name).join(', ') || 'none'}`);
  }
  const kind = kindOf(declaration);

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
  const ok = await sendEvent({ declaration, env, shell, base, type, payload, copies, concurrent: values.concurrent === true, id: values.id });
  return ok ? 0 : 1;
}

/** One event to one source, `copies` times (each signed afresh); prints each answer; true when all were 2xx. */
async function sendEvent(options: {
  declaration: SourceDeclaration;
  env: Record<string, string>;
  shell: Record<string, string>;
  base: string;
  type: string | undefined;
  payload: Record<string, unknown> | string;
  copies: number;
  concurrent: boolean;
  id?: string | undefined;
}): Promise<boolean> {
  const { declaration, env, shell, base, type, payload, copies } = options;
  const sourceName = declaration.name;
  const kind = kindOf(declaration);
  const secret = signingSecret(declaration, secretsOf(declaration, env)[0]!);
  const url = `${base.replace(/\/$/, '')}/webhooks/${sourceName}`;
  // Senders that sign their URL sign the one the source is configured with (HUBSPOT_WEBHOOK_URL...).
  const signedUrl = typeof declaration.url === 'string' && declaration.url ? declaration.url : url;
  // One event: one id, signed afresh for every copy (as a provider's retry is).
  let first: ReturnType<typeof signedDelivery>;
  try {
    first = signedDelivery(kind, payload, secret, { id: options.id, type, url: signedUrl });
  } catch (error) {
    throw new UsageError(`--id: ${(error as Error).message.replace(/^signedDelivery: /, '')}`);
  }
  // A copy is the same bytes, signed again (a fresh timestamp where the provider signs one).
  const sign = () => signedDelivery(kind, first.body, secret, { id: kind === 'github' || kind === 'shopify' ? idOf(first) : first.eventId, type, url: signedUrl });

  process.stdout.write(
    `sending ${copies === 1 ? 'one delivery' : `${copies} deliveries`} of ${sourceName} ${type ?? '(type from the file)'} ${first.eventId} to ${url}${copies > 1 ? (options.concurrent ? ' (at once)' : ' (one after the other)') : ''}\n`,
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
      writeOut(`  #${n + 1} -> ${response.status} ${summary}`);
      if (response.status === 401)
        process.stdout.write(
          `     (ingest verifies with another secret: give both the same ${secretVariable(declaration)}, e.g. in .env.local, or leave both unset under oncehook dev)\n`,
        );
      return response.ok;
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
      process.stdout.write(`  #${n + 1} -> no answer (${cause}): is ingest running at ${base}? (oncehook dev)\n`);
      return false;
    }
  };
  const results: boolean[] = [];
  if (options.concurrent) results.push(...(await Promise.all(Array.from({ length: copies }, (_, n) => deliver(n)))));
  else for (let n = 0; n < copies; n += 1) results.push(await deliver(n));
  const ok = results.every(Boolean);
  if (ok) process.stdout.write(`see it: ${invocation(shell)} show ${sourceName}/${first.eventId}\n`);
  return ok;
}

/** The id a GitHub or Shopify delivery carries in its header (GitHub's stored id adds the hook). */
function idOf(delivery: { eventId: string }): string {
  const colon = delivery.eventId.indexOf(':');
  return colon === -1 ? delivery.eventId : delivery.eventId.slice(colon + 1);
}

/**
 * What signs: the secret itself, or for a sender that signs with a private key (SendGrid,
 * Discord) the private half of the development key pair whose public half is configured.
 */
function signingSecret(declaration: SourceDeclaration, configured: string): string {
  const { devKeyPair, title } = providerOf(declaration.kind);
  if (!devKeyPair) return configured;
  if (configured !== devKeyPair.public) {
    throw new UsageError(
      `source "${declaration.name}" verifies ${title}'s signatures with a public key; only ${title} holds the private key, so oncehook send can sign only for the development key (leave ${secretVariable(declaration)} unset under oncehook dev)`,
    );
  }
  return devKeyPair.private;
}

function secretVariable(declaration: SourceDeclaration): string {
  return declaration.secretsEnv ?? providerOf(declaration.kind).env?.secrets.name ?? 'secret';
}

export const sendCommand: Command = {
  name: 'send',
  summary: 'sign a test event as its provider would and deliver it to ingest',
  usage: 'oncehook send <source> [type] [--copies N] [--concurrent] [--file payload.json] [--id ID] [--url URL]   |   oncehook send --all [--copies N]   |   oncehook send --list',
  help: `  <source>      a configured source (stripe, github, linear, sendgrid, ...: --list shows them, or a name from ONCEHOOK_SOURCES_FILE)
  [type]        the event type; default: the first built-in one of the source's provider (--list shows them)
  --copies N    deliver the same event N times (default 1): the first is accepted, the rest are duplicates
  --concurrent  send the copies at the same moment (default: one after the other)
  --file F      your own JSON payload instead of the built-in one (its id and type are used where the provider puts them in the body)
  --id ID       the event id (default: a fresh one)
  --all         every configured source its first built-in payload, one after the other (is every sender accepted?)
  --url URL     ingest's base URL (default: the running oncehook dev's, else http://127.0.0.1:$PORT, PORT default 3000)
Signs with the secret ingest verifies with: the environment's, or under oncehook dev the
development secret of each provider you have not configured.`,
  usesDevSession: true,
  run: (args, { env }) => send(args, env),
};
