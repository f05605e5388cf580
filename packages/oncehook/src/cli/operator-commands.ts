/**
 * The operator commands of `oncehook`: list, show, redrive, replay, redrive-all, pause, resume,
 * paused (`--help` on each). Exit codes: 0 done, 1 refused or not found, 2 usage. Uses DATABASE_URL, QUEUE_BACKEND,
 * REDIS_URL, QUEUE_PREFIX and ONCEHOOK_SCHEMA like the worker.
 */
import { parseArgs } from 'node:util';
import { type EventFilter, type EventSummary, type EventView, type Operations, type ReplayPlan, SearchTooSlowError } from '@oncehook/core';
import { parseEventSearch, SEARCH_FIELDS } from '../event-search.js';
import { type Command, UsageError } from './command.js';
import { operatorName, withOperations } from './connections.js';
import { writeOut } from './terminal.js';

const COMMANDS = {
  list: {
    summary: "search events, newest first, with each run's state",
    usage:
      'list [--state S] [--waiting W] [--source S] [--type T] [--handler H | --destination NAME] [--event-id ID] [--since T] [--until T] [--older-than D] [--payload PATH=VALUE | PATH~TEXT] [--group G] [--before ROW] [--limit N] [--json]',
    help: `Lists the events that match every filter given, newest first (by arrival), with each
handler run's state; a full page ends with the flag for the next one (--before ROW).
  --state      the event's: received, processing, done, failed (a run failed: a dead letter)
  --waiting    a run held back by flow control: paused, concurrency, rate-limit
  --source     the source name (--provider: the same, its name before); --type the event type, exactly
  --handler    a handler (or --destination) with a run for the event
  --event-id   the provider's event id, with or without --source
  --since, --until   received at or after / before: 2026-12-02T02:51Z (no zone = UTC) or 2h, 3d ago
  --older-than received at least this long ago (30m, 2h, 3d)
  --payload    data.object.customer=cus_42 (equals), customer.email~acme (contains, any
               case), ~refund (anywhere in the payload)
  --group      a failure group's id (oncehook failures)
The admin's events page and GET /admin/api/events take the same filters (docs/operating.md).`,
  },
  show: {
    summary: 'print one event: runs, steps and their keys, deliveries, actions',
    usage: 'show <row id | source/event_id> [--json]',
    help: `Prints one event: a summary first (its state, each handler run with its attempts and last
error, the steps recorded with the keys external steps sent, deliveries, operator actions),
then its payload. --json prints all of it as JSON instead (the event, runs, steps,
deliveries, attempts and actions).`,
  },
  redrive: {
    summary: 'finish what was started (same keys: nothing applied twice)',
    usage: 'redrive <row id | source/event_id> --reason "why" [--handler H | --destination NAME]',
    help: `Finishes what was started: failed, received or stuck runs go back to received and run
again in the SAME generation. Committed steps are skipped; an external step that runs
again sends the SAME idempotency key, so the API applies nothing new. Use it after
fixing whatever made a run fail. Without --handler, every such run of the event.`,
  },
  replay: {
    summary: 'do chosen steps again on purpose (new keys for those steps)',
    usage: 'replay <row id | source/event_id> --reason "why" (--steps a,b | --all-steps) [--handler H | --destination NAME] [--dry-run]',
    help: `Does chosen steps AGAIN, on purpose, as a new generation of one handler's run (done or
failed). --steps names the recorded steps to run again: each external one gets a NEW
idempotency key, so its effect happens once more; every other recorded step is reused
(its result handed back, its effect not repeated). --all-steps runs every step again,
local database writes included (a ledger credited twice, for instance): it must be asked
for explicitly, and lists the local steps it will run again. --dry-run prints the plan
(steps reused, steps re-run, their new keys) and changes nothing. Example: the carrier
lost the parcel, ship again:  replay 42 --steps request-shipment --reason "parcel lost"`,
  },
  pause: {
    summary: 'pause a handler or a source: deliveries still accepted, no run starts',
    usage: 'pause handler <name> | destination <name> | source <name> --reason "why" [--now]',
    help: `Pauses one handler (its runs), one destination (its calls: the same as its handler) or one
source (every handler's and destination's runs of its events).
Deliveries are still verified, claimed and answered 2xx: nothing is dropped or refused.
No new run starts; runs in progress finish (with --now, they stop at their next step
boundary and wait too: a step already committed stays committed); waiting runs show as
received (waiting: paused) in list. The pause is kept in Postgres: it holds for every worker, including those started
later, until resume. Recorded as an operator action with --actor (default $USER).`,
  },
  resume: {
    summary: 'end a pause: the waiting runs start, under their limits',
    usage: 'resume handler <name> | destination <name> | source <name> --reason "why"',
    help: `Ends a pause: every run waiting for it is enqueued and starts under its handler's
concurrency and rate limits; each effect still happens once. Also restarts a circuit
breaker's count of failures. Recorded as an operator action.`,
  },
  paused: {
    summary: 'list what is paused, by whom, why, and how many runs wait',
    usage: 'paused [--json]',
    help: 'Lists every paused handler and source: who paused it (an operator, or circuit-breaker), why, since when, and how many runs wait for it.',
  },
  'redrive-all': {
    summary: 're-drive every matching event (default: the dead letters)',
    usage: 'redrive-all [the filters of list; default --state failed] --reason "why" [--dry-run]',
    help: 'Re-drives every matching event (default: the failed ones), each as `redrive` would. --dry-run lists them and changes nothing.',
  },
  failures: {
    summary: 'failed and retrying runs grouped by handler and error shape',
    usage: 'failures [--handler H | --destination NAME] [--resolved] [--json]',
    help: `Groups the failed and retrying runs by handler and the shape of their last error (ids,
uuids and numbers other than a status code stripped), newest failure first: how many
failed and retry, first and last seen, a sample. Re-drive a group after the fix with
  oncehook redrive-all --group <id> --reason "why" [--dry-run]
and hide it until it fails again with
  oncehook resolve <id> --reason "why"
--resolved lists the resolved groups too.`,
  },
  resolve: {
    summary: 'mark a failure group resolved (hidden until a run of it fails again)',
    usage: 'resolve <group id> --reason "why"',
    help: 'Marks a failure group (oncehook failures) resolved: it is hidden until one of its runs fails again. Nothing about the runs changes; re-drive them with redrive-all --group.',
  },
} satisfies Record<string, { summary: string; usage: string; help: string }>;

function usage(message: string): never {
  throw new UsageError(message);
}

function formatEvent(e: EventSummary): string {
  const runs =
    e.runs
      .map(
        (r) =>
          `${r.handler}:${r.state}${r.waiting ? `(waiting: ${r.waiting})` : ''}${r.attempts > 1 ? `(${r.attempts} attempts)` : ''}${r.generation > 0 ? `@gen${r.generation}` : ''}`,
      )
      .join(' ') || (e.note ? `(${e.note})` : '-');
  const errors = e.runs.filter((r) => r.lastError && r.state !== 'done').map((r) => `\n         ${r.handler} last error: ${r.lastError}`);
  return `${String(e.id).padEnd(8)} ${e.state.padEnd(11)} ${`${e.source}/${e.eventId}`.padEnd(42)} ${e.type.padEnd(29)} ${e.updatedAt.toISOString()}  ${runs}${errors.join('')}`;
}

function formatPlan(plan: ReplayPlan, dryRun: boolean): string {
  const lines = [
    `${dryRun ? 'dry run: would replay' : 'replayed'} event ${plan.rowId}, handler "${plan.handler}" (${plan.fromState}), generation ${plan.generation} -> ${plan.nextGeneration}${dryRun ? ' (nothing changed)' : '; enqueued'}`,
    `  run again:${plan.rerun.length === 0 ? ' none' : ''}`,
    ...plan.rerun.map((s) => `    ${s.name} (${s.kind ?? 'kind unknown'})${s.idempotencyKey ? ` new key ${s.idempotencyKey}` : ''}`),
    `  reused (recorded result handed back, not run again):${plan.reuse.length === 0 ? ' none' : ''}`,
    ...plan.reuse.map((s) => `    ${s.name} (${s.kind ?? 'kind unknown'})`),
  ];
  if (plan.localRerun.length > 0) lines.push(`  LOCAL steps that run again (their database writes apply again): ${plan.localRerun.join(', ')}`);
  return lines.join('\n');
}

/**
 * One operator command as typed, parsed and checked before any connection opens: a usage
 * mistake exits 2 without touching Postgres or the queue.
 */
interface Invocation {
  command: string;
  /** The row id or source/event_id (show, redrive, replay). */
  target: string | undefined;
  /** pause/resume: what is paused; `word` is what the operator said (a destination pauses its handler). */
  paused: { scope: 'handler' | 'source'; name: string; word: string } | undefined;
  filter: EventFilter;
  actor: string;
  flag(name: string): boolean;
  text(name: string): string | undefined;
  /** --reason, required: a usage error without it. */
  needReason(): string;
  /** The target, checked: a usage error without it. */
  needTarget(): string;
}

/** The search's flags: SEARCH_FIELDS with dashes (`--event-id`, `--older-than`). */
const SEARCH_OPTIONS = Object.fromEntries(SEARCH_FIELDS.map((field) => [field.replace(/_/g, '-'), { type: 'string' }])) as Record<string, { type: 'string' }>;

const OPTIONS = {
  ...SEARCH_OPTIONS,
  reason: { type: 'string' },
  actor: { type: 'string' },
  steps: { type: 'string' },
  'all-steps': { type: 'boolean' },
  resolved: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  now: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** pause/resume's positionals: `handler|destination|source <name>`. */
function pauseTarget(command: string, positionals: string[]): Invocation['paused'] {
  if (positionals.length !== 2 || !['handler', 'source', 'destination'].includes(positionals[0]!)) {
    usage(`${command} takes what to ${command}: handler <name>, destination <name> or source <name> (got "${positionals.join(' ').slice(0, 80)}")`);
  }
  const [word, name] = positionals as [string, string];
  // A destination's runs are a handler's (its name): pausing one pauses that handler.
  const scope = word === 'destination' ? 'handler' : (word as 'handler' | 'source');
  if (!/^[a-z0-9][a-z0-9._-]{0,62}$/.test(name)) usage(`"${name.slice(0, 80)}" is not a ${scope} name (1-63 characters of a-z 0-9 . _ -)`);
  return { scope, name, word };
}

function parseInvocation(command: string, args: string[]): Invocation {
  let parsed: ReturnType<typeof parseArgs<{ allowPositionals: true; options: typeof OPTIONS }>>;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: OPTIONS });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { positionals } = parsed;
  const values: Record<string, string | boolean | undefined> = { ...parsed.values };
  const pausing = command === 'pause' || command === 'resume';
  const paused = pausing ? pauseTarget(command, positionals) : undefined;
  const [target, extra] = pausing ? [undefined, undefined] : positionals;
  if (extra !== undefined) usage(`unexpected argument "${extra.slice(0, 40)}"`);
  if (command === 'paused' && positionals.length > 0) usage(`unexpected argument "${positionals[0]!.slice(0, 40)}"`);
  const flag = (name: string) => values[name] === true;
  const text = (name: string) => (typeof values[name] === 'string' ? values[name] : undefined);
  // --destination NAME: a destination's runs are the runs of the handler of that name.
  if (text('destination') !== undefined) {
    if (pausing || command === 'show' || command === 'paused') usage(`${command} takes no --destination${pausing ? ` (write: ${command} destination <name>)` : ''}`);
    if (text('handler') !== undefined) usage('--handler and --destination name the same thing (a destination runs as the handler of its name): give one');
    values.handler = values.destination;
    values.destination = undefined;
  }
  for (const name of ['reason', 'actor', 'steps']) {
    if (text(name)?.includes('\0')) usage(`--${name} must not contain a NUL character`);
  }
  const given = Object.fromEntries(SEARCH_FIELDS.map((field) => [field, text(field.replace(/_/g, '-'))]));
  if (!['list', 'redrive-all'].includes(command)) {
    const extra = SEARCH_FIELDS.find((field) => given[field] !== undefined && field !== 'handler' && field !== 'destination');
    if (extra) usage(`${command} takes no --${extra.replace(/_/g, '-')} (the filters are list's and redrive-all's)`);
  }
  const search = parseEventSearch(given, { maxLimit: 10_000 });
  if (!search.ok) usage(`--${search.message.replace(/_/g, '-')}`);
  return {
    command,
    target,
    paused,
    filter: search.filter,
    actor: text('actor') ?? operatorName(process.env),
    flag,
    text,
    needReason() {
      const reason = text('reason')?.trim();
      if (!reason) usage(`${command} needs --reason "why" (it is recorded${pausing ? '' : ' with the event'})`);
      return reason;
    },
    needTarget() {
      if (target === undefined) return usage(`${command} needs a row id or source/event_id`);
      if (!(/^\d{1,16}$/.test(target) && Number(target) <= Number.MAX_SAFE_INTEGER) && !/^[^/]{1,63}\/.{1,300}$/.test(target)) {
        return usage(`"${target.slice(0, 40)}" is neither a row id (1 to 9007199254740991) nor source/event_id`);
      }
      return target;
    },
  };
}

/** Prints a line, or a value as indented JSON. */
function out(value: unknown): void {
  // Event types, ids and errors come from outside: control characters are printed escaped.
  writeOut(typeof value === 'string' ? value : JSON.stringify(value, null, 2));
}

/** Prints a last line, returns the exit code. */
function exitWith(code: 0 | 1, value: unknown): number {
  out(value);
  return code;
}

/** Each command's work once connected; the exit code it returns (0 done, 1 refused or not found). */
type Runner = (call: Invocation, ops: Operations) => Promise<number>;

const list: Runner = async (call, ops) => {
  let events: EventSummary[];
  try {
    events = await ops.list(call.filter);
  } catch (error) {
    if (error instanceof SearchTooSlowError) return exitWith(1, `list: ${error.message}`);
    throw error;
  }
  if (call.flag('json')) return exitWith(0, events);
  out('row id   state       source/event_id                          type                          updated                   runs');
  for (const e of events) out(formatEvent(e));
  const full = events.length === (call.filter.limit ?? 50);
  out(`${events.length} event(s)${full ? `; the next page: the same flags and --before ${events[events.length - 1]!.id}` : ''}`);
  return 0;
};

/** One event, readable: state, runs, steps and their keys, deliveries, operator actions, then the payload. */
function formatDetail(detail: EventView): string {
  const e = detail.event;
  const lines = [
    `event ${e.id}  ${e.source}/${e.eventId}  ${e.type}`,
    `  state ${e.state}${e.note ? ` (${e.note})` : ''}; received ${e.receivedAt.toISOString()}${e.finishedAt ? `, finished ${e.finishedAt.toISOString()}` : ''}`,
    e.origin === 'backfill'
      ? `  origin backfill: fetched from the provider's API, never delivered (${e.originDetail ?? 'a backfill'}); deliveries since ${detail.deliveryCount} (duplicates)`
      : `  deliveries ${detail.deliveryCount} (${Math.max(0, detail.deliveryCount - 1)} duplicate(s))`,
    `runs:${detail.runs.length === 0 ? ' none' : ''}`,
  ];
  for (const r of detail.runs) {
    lines.push(
      `  ${r.handler}: ${r.state}${r.waiting ? ` (waiting: ${r.waiting})` : ''}, attempt ${r.attempts}, generation ${r.generation}${r.lastError ? `\n    last error: ${r.lastError}` : ''}`,
    );
    for (const s of detail.steps.filter((step) => step.runId === r.id))
      lines.push(
        `    step ${s.name} (${s.kind ?? 'step'}, generation ${s.generation})${s.idempotencyKey ? ` key ${s.idempotencyKey}` : ''}${s.reusedFrom === null ? '' : ` reused from generation ${s.reusedFrom}`}`,
      );
  }
  if (detail.operatorActions.length > 0) lines.push('operator actions:');
  for (const a of detail.operatorActions) lines.push(`  ${a.createdAt.toISOString()} ${a.mode} of ${a.handler ?? 'the event'} by ${a.actor} from ${a.fromState}: ${a.reason}`);
  lines.push(e.prunedAt ? `payload: deleted by retention on ${e.prunedAt.toISOString()}` : `payload${detail.payloadView.truncated ? ' (cut)' : ''}:\n${detail.payloadView.text}`);
  return lines.join('\n');
}

const show: Runner = async (call, ops) => {
  const detail = await ops.show(call.needTarget());
  if (!detail) return exitWith(1, `no event ${call.target}`);
  if (!call.flag('json')) return exitWith(0, formatDetail(detail));
  // The payload as JSON when any printer can take it, its bounded text when not.
  const { payloadView, ...rest } = detail;
  out(payloadView.truncated ? detail : rest);
  return 0;
};

const failures: Runner = async (call, ops) => {
  const groups = await ops.failureGroups({ handler: call.filter.handler, includeResolved: call.flag('resolved') });
  if (call.flag('json')) return exitWith(0, groups);
  for (const g of groups) {
    out(
      `${g.id}  ${g.handler}: ${g.failed} failed, ${g.retrying} retrying${g.resolved ? ' (resolved)' : ''}  first ${g.firstSeen.toISOString()}, last ${g.lastSeen.toISOString()}`,
    );
    out(`    ${g.shape}`);
    out(`    latest: event ${g.sampleEvent}: ${g.sampleError}`);
  }
  out(`${groups.length} group(s)${groups.length > 0 ? '; re-drive one after the fix: oncehook redrive-all --group <id> --reason "..." [--dry-run]' : ''}`);
  return 0;
};

const resolve: Runner = async (call, ops) => {
  const id = call.target;
  if (id === undefined || !/^[0-9a-f]{12}$/.test(id)) usage(`resolve needs a failure group id: 12 hex digits, as oncehook failures prints it (got "${(id ?? '').slice(0, 20)}")`);
  const result = await ops.resolveFailureGroup(id, call.actor, call.needReason());
  if (!result.ok) return exitWith(1, `resolve refused: ${result.reason}`);
  return exitWith(0, `resolved failure group ${id} (${result.handler}: ${result.shape}); hidden until one of its runs fails again`);
};

/** redrive and replay: the same event lookup, then the same generation or a new one. */
const redriveOrReplay: Runner = async (call, ops) => {
  const ref = call.needTarget();
  const dryRun = call.flag('dry-run');
  const reason = call.command === 'replay' && dryRun ? (call.text('reason') ?? 'dry run') : call.needReason();
  const detail = await ops.show(ref);
  if (!detail) return exitWith(1, `no event ${ref}`);
  const rowId = detail.event.id;
  if (call.command === 'redrive') {
    const result = await ops.redrive(rowId, { handler: call.text('handler') }, call.actor, reason);
    if (!result.ok) return exitWith(1, `redrive refused: ${result.reason}`);
    if (result.dispatch) out(`redrive: event ${rowId} was never dispatched; its dispatch is enqueued`);
    else
      for (const run of result.runs)
        out(
          `redrive: event ${rowId}, handler "${run.handler}" ${run.fromState} -> received (same generation ${run.generation}: committed steps skipped, same outbound keys); enqueued`,
        );
    return 0;
  }
  const steps = call
    .text('steps')
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const result = await ops.replay(rowId, { handler: call.text('handler'), steps, allSteps: call.flag('all-steps'), dryRun }, call.actor, reason);
  if (!result.ok) return exitWith(1, `replay refused: ${result.reason}`);
  out(call.flag('json') ? result : formatPlan(result.plan, result.dryRun));
  return 0;
};

const pause: Runner = async (call, ops) => {
  const reason = call.needReason();
  const { scope, name, word } = call.paused!;
  const result = await ops.pause({ scope, name }, call.actor, reason, { now: call.flag('now') });
  if (!result.ok) return exitWith(1, `pause refused: ${result.reason}`);
  if (result.alreadyPaused) out(`${word} "${name}" was already paused by ${result.pause.actor} since ${new Date(result.pause.pausedAt).toISOString()}: ${result.pause.reason}`);
  else out(`paused ${word} "${name}": deliveries are still accepted; no new run starts until: oncehook resume ${word} ${name} --reason "..."`);
  return 0;
};

const resume: Runner = async (call, ops) => {
  const reason = call.needReason();
  const { scope, name, word } = call.paused!;
  const result = await ops.resume({ scope, name }, call.actor, reason);
  if (!result.ok) return exitWith(1, `resume refused: ${result.reason}`);
  out(`resumed ${word} "${name}" (paused since ${new Date(result.resumed.pausedAt).toISOString()}): ${result.released} waiting run(s) enqueued`);
  if (result.enqueueFailed > 0) out(`  ${result.enqueueFailed} could not be enqueued now (queue unreachable); the reconciler enqueues them`);
  return 0;
};

const paused: Runner = async (call, ops) => {
  const pauses = await ops.pauses();
  if (call.flag('json')) return exitWith(0, pauses);
  for (const p of pauses) out(`${p.scope.padEnd(8)} ${p.name.padEnd(30)} since ${new Date(p.pausedAt).toISOString()} by ${p.actor}, ${p.waiting ?? 0} run(s) waiting: ${p.reason}`);
  out(`${pauses.length} paused`);
  return 0;
};

const redriveAll: Runner = async (call, ops) => {
  const dryRun = call.flag('dry-run');
  const reason = dryRun ? (call.text('reason') ?? 'dry run') : call.needReason();
  const result = await ops.bulkRedrive(call.filter, { dryRun, actor: call.actor, reason });
  if (call.flag('json')) out(result);
  else {
    out(`${result.dryRun ? 'dry run: would re-drive' : 're-drove'} ${result.matched} event(s)${result.dryRun ? ' (nothing changed)' : ''}`);
    for (const r of result.results) out(r.ok ? `  ${r.rowId}` : `  ${r.rowId} refused: ${r.reason}`);
  }
  return result.results.some((r) => !r.ok) ? 1 : 0;
};

const RUNNERS: Record<keyof typeof COMMANDS, Runner> = {
  list,
  show,
  redrive: redriveOrReplay,
  replay: redriveOrReplay,
  pause,
  resume,
  paused,
  'redrive-all': redriveAll,
  failures,
  resolve,
};

async function operate(command: keyof typeof COMMANDS, args: string[], env: Record<string, string>): Promise<number> {
  const call = parseInvocation(command, args);
  return withOperations(env, ({ ops }) => RUNNERS[command](call, ops));
}

/** The operator commands, for the `oncehook` dispatcher. */
export const operatorCommands: Command[] = (Object.entries(COMMANDS) as [keyof typeof COMMANDS, (typeof COMMANDS)[keyof typeof COMMANDS]][]).map(([name, spec]) => ({
  name,
  summary: spec.summary,
  usage: `oncehook ${spec.usage}`,
  help: spec.help,
  usesDevSession: true,
  run: (args, { env }) => operate(name, args, env),
}));
