/**
 * `oncehook backfill <source> --since 72h`: lists, from the provider's own API, the events it
 * did not manage to deliver in the window, and claims each one Oncehook does not have through
 * the delivery's claim (@oncehook/core backfill.ts). Prints what it found (listed, already
 * known, new, refused), a progress line on long runs, and exits 1 on an API error with what was
 * done until then. Recorded as an operator action (mode `backfill`).
 */
import { claimBackfilled, emptyBackfillCounts, type BackfillCounts } from '@oncehook/core';
import { createLogger } from '@oncehook/shared';
import { BACKFILL_KINDS, BackfillApiError, DEFAULT_BACKFILL_LIMITS, providerOf, sourceDeclarations } from '@oncehook/providers';
import { parseArgs } from 'node:util';
import { loadIngestConfig } from '../config.js';
import { parseInstant } from '../event-search.js';
import { type Command, UsageError } from './command.js';
import { operatorName, withOperations } from './connections.js';
import { writeOut } from './terminal.js';

const OPTIONS = {
  since: { type: 'string' },
  until: { type: 'string' },
  types: { type: 'string' },
  all: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  actor: { type: 'string' },
  'key-env': { type: 'string' },
  'max-pages': { type: 'string' },
  verbose: { type: 'boolean' },
} as const;

/** A progress line every this many API pages (a page is up to 100 events). */
const PROGRESS_EVERY_PAGES = 10;
/** The longest wait a 429's Retry-After is followed for. */
const MAX_RATE_LIMIT_WAIT_MS = 60_000;

function out(line: string): void {
  writeOut(line);
}

/** The counts as one line. */
export function describeCounts(counts: BackfillCounts, dryRun: boolean): string {
  const parts = [
    `listed ${counts.listed}`,
    `already known ${counts.known}`,
    counts.new === 0
      ? 'new 0'
      : dryRun
        ? `new ${counts.new} (would be claimed)`
        : `new ${counts.new} (claimed${counts.enqueueFailed > 0 ? `; ${counts.enqueueFailed} not enqueued now, the reconciler will` : ', dispatch enqueued'})`,
    `refused ${counts.refused}`,
  ];
  if (counts.expired > 0) parts.push(`older than the key horizon ${counts.expired} (not claimed)`);
  return parts.join(', ');
}

const withBackfill = () => BACKFILL_KINDS.join(', ');

export const backfillCommand: Command = {
  name: 'backfill',
  // It talks to the running stack: a running oncehook dev or npm start's database and queue.
  usesDevSession: true,
  summary: 'claim the events a provider never delivered, listed from its own API',
  usage: 'oncehook backfill <source> --since 72h [--until T] [--types a,b] [--all] [--dry-run] [--actor NAME] [--key-env VAR] [--max-pages N] [--verbose]',
  help: `Lists the events of <source> (a configured source: its kind says which provider's API)
created in the window from the provider's own API, with the account's read key, and claims
each one through the same claim as a delivery: an event already delivered is a duplicate and
nothing happens; a missing one is claimed with origin "backfill" and runs through the handlers
and destinations like any other. Providers with such an API: ${withBackfill()}.

  --since T      start of the window: a time ago (30m, 72h, 7d) or a time (2026-12-02T10:00Z)
  --until T      end of the window (default now)
  --types a,b    only these event types
  --all          every event of the window, not only those the provider says were not delivered
  --dry-run      count what would be claimed; claim nothing
  --key-env VAR  read the API key from VAR instead of the provider's variable (a second account)
  --actor NAME   recorded with the run (default $USER)
  --max-pages N  stop after N pages of the API's list (default ${DEFAULT_BACKFILL_LIMITS.maxPages});
                 each answer is also capped at ${DEFAULT_BACKFILL_LIMITS.maxResponseBytes / 1024 / 1024} MiB and the run at
                 ${DEFAULT_BACKFILL_LIMITS.maxBytes / 1024 / 1024} MiB, and a page cursor the API sends twice stops it
  --verbose      one line per event

Stripe: STRIPE_API_KEY (a restricted key with Events: Read), STRIPE_API_BASE. GitHub:
GITHUB_API_TOKEN (Webhooks: read), GITHUB_BACKFILL_HOOK (<owner>/<repo>/<hook id> or
org/<org>/<hook id>), GITHUB_API_BASE. Paddle: PADDLE_API_KEY (notification.read),
PADDLE_API_BASE. Every call goes to that base's origin only (a next-page link or a
redirect elsewhere stops the run: the key stays with the API), never to a link-local or
metadata address. Uses
DATABASE_URL, ONCEHOOK_SCHEMA, the queue's variables and KEY_RETENTION_DAYS. Exit 1 when the
provider's API refused or failed (what was claimed until then stays claimed; run it again:
those are then duplicates). See docs/operating.md, "Recovering missed events".`,

  async run(args, { env }) {
    let parsed: ReturnType<typeof parseArgs<{ allowPositionals: true; options: typeof OPTIONS }>>;
    try {
      parsed = parseArgs({ args, allowPositionals: true, options: OPTIONS });
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    const { values, positionals } = parsed;
    if (positionals.length !== 1) throw new UsageError(`backfill takes one source name (got ${positionals.length === 0 ? 'none' : `"${positionals.join(' ').slice(0, 60)}"`})`);
    const sourceName = positionals[0]!;
    const now = new Date();
    if (values.since === undefined) throw new UsageError('backfill needs --since: how far back to look (72h, 7d, or a time)');
    const since = parseInstant(values.since, now);
    if (!since) throw new UsageError(`--since "${values.since.slice(0, 40)}" is neither a time ago (30m, 72h, 7d) nor a time (2026-12-02T10:00Z)`);
    const until = values.until === undefined ? now : parseInstant(values.until, now);
    if (!until) throw new UsageError(`--until "${values.until!.slice(0, 40)}" is neither a time ago (30m, 72h, 7d) nor a time (2026-12-02T10:00Z)`);
    if (since.getTime() >= until.getTime()) throw new UsageError(`--since (${since.toISOString()}) must be before --until (${until.toISOString()})`);
    const types = values.types === undefined ? null : values.types.split(',').map((t) => t.trim());
    if (types?.some((t) => !/^[A-Za-z0-9._:*-]{1,255}$/.test(t)))
      throw new UsageError(`--types "${values.types!.slice(0, 60)}": give event types separated by commas (payment_intent.succeeded,charge.refunded)`);
    const keyEnv = values['key-env'];
    if (keyEnv !== undefined && !/^[A-Z][A-Z0-9_]{0,63}$/.test(keyEnv)) throw new UsageError(`--key-env "${keyEnv.slice(0, 40)}" is not an environment variable name`);
    const maxPages = values['max-pages'] === undefined ? DEFAULT_BACKFILL_LIMITS.maxPages : Number(values['max-pages']);
    if (!Number.isInteger(maxPages) || maxPages < 1 || maxPages > 1_000_000)
      throw new UsageError(`--max-pages "${String(values['max-pages']).slice(0, 20)}": a whole number from 1 to 1000000`);
    const dryRun = values['dry-run'] === true;
    const actor = values.actor ?? operatorName(env);

    const config = loadIngestConfig(env);
    const declarations = sourceDeclarations(config);
    let declaration: { name: string; kind: string } | undefined = declarations.find((d) => d.name === sourceName);
    if (!declaration && BACKFILL_KINDS.includes(sourceName)) {
      // Not configured in this shell (no webhook secret here: ingest holds it), but the name of
      // a provider with a backfill: the source ingest names after that provider by default.
      declaration = { name: sourceName, kind: sourceName };
      out(
        `backfill: no source "${sourceName}" is configured in this environment; claiming under source "${sourceName}", the name ingest gives ${sourceName}'s deliveries by default`,
      );
    }
    if (!declaration) {
      out(
        `backfill: no source named "${sourceName}" is configured (configured: ${declarations.map((d) => d.name).join(', ') || 'none'}; providers with a backfill: ${withBackfill()})`,
      );
      return 1;
    }
    const api = providerOf(declaration.kind).backfill;
    if (!api) {
      out(
        `backfill: ${declaration.kind} (source "${sourceName}") has no API that lists its events, so its missed deliveries cannot be recovered from here; providers that have one: ${withBackfill()}`,
      );
      return 1;
    }
    if (!values.all && !api.knowsUndelivered) out(`backfill: ${declaration.kind}'s API cannot tell which events were not delivered: listing every event of the window`);
    const oldest = new Date(now.getTime() - api.history.days * 86_400_000);
    if (since < oldest) out(`backfill: ${api.history.what}: events created before ${oldest.toISOString()} cannot be listed`);
    const apiEnv = keyEnv === undefined ? env : { ...env, [api.env[0]!.name]: env[keyEnv] };
    const what = `oncehook backfill ${args.join(' ')}`;
    const detail = `${what} (by ${actor}, ${now.toISOString()})`;

    return withOperations(env, async ({ config: common, pool, queries, queue }) => {
      const counts = emptyBackfillCounts();
      let pages = 0;
      const items = api.list(
        { env: apiEnv, source: { name: declaration.name, kind: declaration.kind }, maxCalls: null, maxRateLimitWaitMs: MAX_RATE_LIMIT_WAIT_MS, limits: { maxPages } },
        { since, until, types, all: values.all === true },
        {
          onPage() {
            pages += 1;
            if (pages % PROGRESS_EVERY_PAGES === 0) out(`backfill: ${pages} pages so far: ${describeCounts(counts, dryRun)}`);
          },
          onRateLimited(waitMs) {
            out(`backfill: the provider's API is rate limiting us; asking again in ${Math.ceil(waitMs / 1000)} s`);
          },
        },
      );
      const log = createLogger('backfill', 'silent');
      let failure: string | null = null;
      try {
        await claimBackfilled(
          { pool, queries, queue, log },
          items,
          {
            dryRun,
            detail,
            keyHorizonDays: common.KEY_RETENTION_DAYS,
            now,
            onItem(item) {
              if (item.result === 'refused') out(`backfill: ${item.id} refused: ${item.reason}`);
              else if (values.verbose) out(`${item.result.padEnd(8)} ${item.id}${item.type ? ` ${item.type}` : ''}`);
            },
          },
          counts,
        );
      } catch (error) {
        if (!(error instanceof BackfillApiError)) throw error;
        failure = error.message;
      }
      const summary = `${declaration.name} ${since.toISOString()} .. ${until.toISOString()}: ${describeCounts(counts, dryRun)} (${pages} page${pages === 1 ? '' : 's'} listed)`;
      if (!dryRun) await queries.recordBackfill(pool, declaration.name, actor, what, { ...counts, pages, failed: failure === null ? 0 : 1 });
      if (failure !== null) {
        out(`backfill failed: ${failure}`);
        out(`backfill: until then, ${summary}; run it again to go on (what was claimed is then already known)`);
        return 1;
      }
      out(`backfill${dryRun ? ' (dry run: nothing claimed)' : ''}: ${summary}`);
      return 0;
    });
  },
};
