/**
 * Every `oncehook` operator command the README and docs/ tell a reader to run (issue 25), read
 * from the Markdown itself (sh blocks and inline code), is run as written against a real
 * database: none may be a usage mistake (exit 2), and the read-only ones (list, show of an
 * existing event, --dry-run, --help, send --list) succeed. A doc that renames an option, drops
 * an argument or shows a command that no longer exists fails here. Placeholders (`<id>`, `...`)
 * are filled with a real event's id; `backfill stripe` reads the sandbox's Stripe events API
 * (empty: nothing to claim); the commands that run until stopped (dev, ingest, worker)
 * and `send` (which needs a running ingest) are covered by test/first-minutes.test.ts,
 * test/user-project.test.ts and test/cli.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, STRIPE_SECRET, startSandbox, type SandboxHandle } from '@oncehook/harness';
import { SANDBOX_STRIPE_API_KEY } from '@oncehook/sandbox';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCliHere } from './helpers/cli-here.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, seedRun, T } from './helpers/stack.js';

const DOCS = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const RUNS_UNTIL_STOPPED = new Set(['dev', 'ingest', 'worker', 'send', 'migrate']);

/** Words of a command line: double and single quotes group, a trailing `# comment` is dropped. */
function words(line: string): string[] {
  const out: string[] = [];
  // A placeholder with spaces inside (`<row id | source/event_id>`) is one word.
  for (const m of line
    .replace(/\s+#\s.*$/, '')
    .replace(/<[^>]*>/g, '<placeholder>')
    .matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g))
    out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** `npm run oncehook -- <args>` and `npx oncehook <args>` lines of every doc, with where each is. */
function documentedCommands(): { where: string; args: string[] }[] {
  const found: { where: string; args: string[] }[] = [];
  for (const doc of DOCS) {
    const text = readFileSync(path.join(ROOT, doc), 'utf8');
    const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n'));
    const inline = [...text.replace(/```[\s\S]*?```/g, '').matchAll(/`((?:npm run oncehook --|npx oncehook) [^`]+)`/g)].map((m) => m[1]!);
    for (const line of [...blocks, ...inline]) {
      const command = /^\s*(?:npm run oncehook --|npx oncehook)\s+(.*)$/.exec(line)?.[1];
      if (command) found.push({ where: `${doc}: ${line.trim()}`, args: words(command) });
    }
  }
  return found;
}

let db: TestDatabase;
let sandbox: SandboxHandle;
beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
});
afterAll(async () => {
  await sandbox?.close();
  await db?.drop();
});

/** A fresh event with a failed run, for one command (commands change state: a re-drive, a replay). */
async function freshEvent(n: number): Promise<{ row: number; key: string }> {
  const eventId = `evt_docs_${n}`;
  const row = await claimStripe(db.pool, eventId, 'payment_intent.succeeded');
  const run = await seedRun(db.pool, row, { handler: 'shop.fulfil', state: 'failed', attempts: 10, lastError: 'the carrier API answered 503' });
  // The step the docs' replay examples name, recorded by an earlier attempt.
  await db.pool.query(
    `INSERT INTO ${T.steps} (run_id, generation, name, kind, result, idempotency_key) VALUES ($1, 0, 'request-shipment', 'external', '{"shipment":"shp_1"}', 'key-1')`,
    [run],
  );
  return { row, key: `stripe/${eventId}` };
}

/** Runs one command in this process (what bin/oncehook.js runs), its output captured (helpers/cli-here.ts). */
async function oncehook(args: string[]): Promise<{ code: number | 'running'; out: string }> {
  const { code, output } = await runCliHere(args, {
    DATABASE_URL: db.url,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    STRIPE_API_KEY: SANDBOX_STRIPE_API_KEY,
    STRIPE_API_BASE: sandbox.url,
  });
  return { code, out: output };
}

it('finds the documented commands (the CLI examples of operating.md and the README at least)', () => {
  const commands = documentedCommands();
  expect(commands.length).toBeGreaterThan(15);
  expect(commands.some((c) => c.where.startsWith('docs/operating.md'))).toBe(true);
});

it('every documented operator command runs as written: never a usage mistake; the read-only ones succeed', async () => {
  const problems: string[] = [];
  let n = 0;
  const ran: string[] = [];
  for (const { where, args: raw } of documentedCommands()) {
    if (raw.length === 0 || raw[0]!.includes('<placeholder>') || (RUNS_UNTIL_STOPPED.has(raw[0]!) && !raw.includes('--help') && !raw.includes('--list'))) continue;
    // Placeholders (<angle brackets>, a truncated `evt_1NqW...`, a bare row id like 1234) become a real event.
    n += 1;
    const event = await freshEvent(n);
    const args = raw.map((w) => {
      if (!(w.includes('<placeholder>') || w.endsWith('...') || /^\d{3,}$/.test(w))) return w;
      return w.includes('/') ? event.key : String(event.row);
    });
    const { code, out } = await oncehook(args);
    ran.push(args[0]!);
    const readOnly = ['list', 'show'].includes(args[0]!) || args.includes('--dry-run') || args.includes('--help') || args.includes('--list');
    if (code === 2) problems.push(`${where}\n  -> usage mistake: ${out.trim().split('\n')[0]}`);
    else if (readOnly && code !== 0) problems.push(`${where}\n  -> exit ${code}: ${out.trim().split('\n').slice(0, 2).join(' / ')}`);
  }
  expect(problems).toEqual([]);
  // Every operator command appears in the docs and was run.
  expect([...new Set(ran)].sort()).toEqual(expect.arrayContaining(['list', 'redrive', 'redrive-all', 'replay', 'show']));
});
