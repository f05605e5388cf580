/**
 * `npm run docs:senders`: writes the table senders (packages/providers/src/senders.ts)
 * into docs/providers.md ("Senders described as data"), and every provider's variables (the
 * provider list, packages/providers/src/providers.ts) into the README's table and into
 * docker-compose.yml's ingest environment, between the `<!-- senders:... -->` markers. test/sender-docs.test.ts fails when either
 * is out of date. Prints what it changed; exits 1 when a marker is missing.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BACKFILL_VARIABLES, PROVIDER_VARIABLES, SENDER_SCHEMES, type SenderScheme, type SignedPart, type ValueSpec, senderVariables, signatureCovers } from '@oncehook/providers';

const ROOT = path.resolve(import.meta.dirname, '..');

function part(p: SignedPart): string {
  if (typeof p === 'string') return p === 'form-params-sorted' ? 'sorted form params' : p;
  return 'literal' in p ? `\`${p.literal}\`` : `\`${p.header}\``;
}

function scheme(s: SenderScheme): string {
  const sig = s.signature;
  let text: string;
  if (sig.family === 'hmac') text = `HMAC-${sig.algorithm.toUpperCase()} ${sig.encoding} in \`${sig.header}\` over ${sig.signed.map(part).join(' + ')}`;
  else if (sig.family === 'ed25519' || sig.family === 'ecdsa-p256')
    text = `${sig.family === 'ed25519' ? 'Ed25519' : 'ECDSA P-256'} (public key) in \`${sig.header}\` over ${sig.signed.map(part).join(' + ')}`;
  else if (sig.family === 'hmac-in-body') text = `HMAC-${sig.algorithm.toUpperCase()} in the body (\`${sig.object}\`) over ${sig.signedFields.join(' + ')} only`;
  else if (sig.family === 'token') text = `token in \`${sig.header}\` (no signature)`;
  else text = 'Basic auth (no signature)';
  return s.timestamp ? `${text}; ${s.timestamp.toleranceSeconds} s tolerance` : text;
}

function value(spec: ValueSpec): string {
  if ('join' in spec) return spec.join.map(value).join(' . ');
  if ('firstOf' in spec) return spec.firstOf.map((p) => `\`${p.prefix}\`\`${p.field}\``).join(' or ');
  if ('header' in spec) return `\`${spec.header}\``;
  if ('field' in spec) return (Array.isArray(spec.field) ? spec.field : [spec.field]).map((f) => `\`${f}\``).join(' . ');
  return `\`${spec.value}\``;
}

export function sendersTable(): string {
  const rows = ['| Sender (`kind`) | Variables | Scheme | Id (signed?) | Type | Window | Batch / handshake |', '|---|---|---|---|---|---|---|'];
  for (const s of Object.values(SENDER_SCHEMES)) {
    const v = senderVariables(s);
    const id = s.batch ? s.batch.id : (s.id ?? { bodyHash: true });
    const idText = 'bodyHash' in id ? 'sha256 of the body' : 'header' in id ? `\`${id.header}\`` : `\`${id.field}\``;
    const signed = s.batch || signatureCovers(s, id) ? 'yes' : s.replayKey ? `no: \`${s.replayKey}\` is a replay key` : 'no: body dedupe';
    const type = s.batch ? s.batch.type : (s.type ?? { value: 'webhook' });
    const extras = [s.batch ? `batch (\`${s.batch.items}\`)` : '', s.handshake ? 'handshake' : '', s.get ? 'GET check' : ''].filter(Boolean).join(', ') || '-';
    const variables = [v.secrets, v.url, v.verifyToken]
      .filter(Boolean)
      .map((x) => `\`${x}\``)
      .join(', ');
    rows.push(
      `| ${s.title} (\`${s.kind}\`) | ${variables} | ${scheme(s)} | ${idText} (${signed}) | ${value(type)} | ${s.redelivery ? `${s.redelivery.days} d` : 'unknown'} | ${extras} |`,
    );
  }
  return rows.join('\n');
}

/** Every provider's variables (the adapters', then the table senders'), from the provider list. */
export function providerVariableRows(): string {
  const rows: string[] = ['| Variable | Default | Meaning |', '|---|---|---|'];
  for (const variable of PROVIDER_VARIABLES) rows.push(`| \`${variable.name}\` | ${variable.shown === 'unset' ? 'unset' : `\`${variable.shown}\``} | ${variable.meaning} |`);
  return rows.join('\n');
}

/** The variables of the providers' APIs, read by the scheduled backfill on the workers and by `oncehook backfill`. */
export function backfillVariableRows(): string {
  const rows: string[] = ['| Variable | Default | Meaning |', '|---|---|---|'];
  for (const variable of BACKFILL_VARIABLES) rows.push(`| \`${variable.name}\` | ${variable.shown === 'unset' ? 'unset' : `\`${variable.shown}\``} | ${variable.meaning} |`);
  return rows.join('\n');
}

/** The worker services' environment entries of the providers' API variables (docker-compose.yml). */
export function backfillComposeEnv(): string {
  return BACKFILL_VARIABLES.map((variable) => `    ${variable.name}: \${${variable.name}:-}`).join('\n');
}

/** The ingest service's environment entries of every provider variable (docker-compose.yml). */
export function providerComposeEnv(): string {
  return PROVIDER_VARIABLES.map((variable) => `      ${variable.name}: \${${variable.name}:-}`).join('\n');
}

/** `text` with the lines between `<!-- senders:<name> -->` and `<!-- /senders:<name> -->` replaced. */
export function between(text: string, name: string, content: string): string | null {
  const open = `<!-- senders:${name} -->`;
  const close = name === 'compose' ? `      # <!-- /senders:${name} -->` : name === 'compose-backfill' ? `    # <!-- /senders:${name} -->` : `<!-- /senders:${name} -->`;
  const start = text.indexOf(open);
  const end = text.indexOf(close);
  if (start === -1 || end === -1 || end < start) return null;
  return `${text.slice(0, start + open.length)}\n${content}\n${text.slice(end)}`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  let failed = false;
  for (const [file, name, content] of [
    ['docs/providers.md', 'table', sendersTable()],
    ['README.md', 'variables', providerVariableRows()],
    ['README.md', 'backfill-variables', backfillVariableRows()],
    ['docker-compose.yml', 'compose', providerComposeEnv()],
    ['docker-compose.yml', 'compose-backfill', backfillComposeEnv()],
  ] as const) {
    const full = path.join(ROOT, file);
    const text = readFileSync(full, 'utf8');
    const next = between(text, name, content);
    if (next === null) {
      process.stderr.write(`${file}: no <!-- senders:${name} --> ... <!-- /senders:${name} --> markers\n`);
      failed = true;
    } else if (next === text) process.stdout.write(`${file}: up to date\n`);
    else {
      writeFileSync(full, next);
      process.stdout.write(`${file}: senders ${name} rewritten\n`);
    }
  }
  process.exit(failed ? 1 : 0);
}
