/**
 * The operator commands of `oncehook`: list, show, redrive, replay, redrive-all, pause, resume,
 * paused (`--help` on each). Exit codes: 0 done, 1 refused or not found, 2 usage. Uses DATABASE_URL, QUEUE_BACKEND,
 * REDIS_URL, QUEUE_PREFIX and ONCEHOOK_SCHEMA like the worker.
 */
import { parseArgs } from 'node:util';
import type { EventFilter, EventSummary, ReplayPlan } from '@oncehook/core';
import { EVENT_STATES, type EventState } from '@oncehook/core';
import { type Command, UsageError } from './command.js';
import { withOperations } from './connections.js';

const COMMANDS: Record<string, { summary: string; usage: string; help: string }> = {
  list: {
    summary: "list events, newest activity first, with each run's state",
    usage: 'list [--state S] [--provider P] [--type T] [--handler H | --destination NAME] [--older-than 30m|2h|3d] [--limit N] [--json]',
    help: `Lists events, newest activity first, with each handler run's state. --state is the
event's: received (not dispatched yet), processing, done, failed (a run failed: a dead letter).`,
  },
  show: {
    summary: 'print one event: runs, steps and their keys, deliveries, actions',
    usage: 'show <row id | provider/event_id>',
    help: 'Prints one event as JSON: the event, its handler runs, their recorded steps (with the idempotency keys external steps sent) and every operator action.',
  },
  redrive: {
    summary: 'finish what was started (same keys: nothing applied twice)',
    usage: 'redrive <row id | provider/event_id> --reason "why" [--handler H | --destination NAME]',
    help: `Finishes what was started: failed, received or stuck runs go back to received and run
again in the SAME generation. Committed steps are skipped; an external step that runs
again sends the SAME idempotency key, so the API applies nothing new. Use it after
fixing whatever made a run fail. Without --handler, every such run of the event.`,
  },
  replay: {
    summary: 'do chosen steps again on purpose (new keys for those steps)',
    usage: 'replay <row id | provider/event_id> --reason "why" (--steps a,b | --all-steps) [--handler H | --destination NAME] [--dry-run]',
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
    usage: 'redrive-all [--state failed] [--provider P] [--type T] [--handler H | --destination NAME] [--older-than D] [--limit N] --reason "why" [--dry-run]',
    help: 'Re-drives every matching event (default: the failed ones), each as `redrive` would. --dry-run lists them and changes nothing.',
  },
};

function usage(message: string): never {
  throw new UsageError(message);
}

/** "90" (seconds), "30m", "2h", "3d" -> seconds. */
export function parseDuration(value: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  if (!match) usage(`--older-than: "${value}" is not a duration (e.g. 90, 30m, 2h, 3d)`);
  const factor = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  const seconds = Number(match[1]) * factor;
  if (seconds > 10 * 365 * 86_400) usage(`--older-than: "${value}" is more than 10 years`);
  return seconds;
}

function parseLimit(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,5}$/.test(value) || Number(value) < 1 || Number(value) > 10_000) usage(`--limit must be a whole number from 1 to 10000 (got "${value}")`);
  return Number(value);
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
  return `${String(e.id).padEnd(8)} ${e.state.padEnd(11)} ${`${e.provider}/${e.eventId}`.padEnd(42)} ${e.type.padEnd(29)} ${e.updatedAt.toISOString()}  ${runs}${errors.join('')}`;
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

async function operate(command: string, args: string[], env: Record<string, string>): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ allowPositionals: true; options: Record<string, { type: 'string' | 'boolean' }> }>>;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        state: { type: 'string' },
        provider: { type: 'string' },
        type: { type: 'string' },
        handler: { type: 'string' },
        destination: { type: 'string' },
        'older-than': { type: 'string' },
        limit: { type: 'string' },
        reason: { type: 'string' },
        actor: { type: 'string' },
        steps: { type: 'string' },
        'all-steps': { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        now: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { positionals, values } = parsed;
  const pausing = command === 'pause' || command === 'resume';
  const [target, extra] = pausing ? [undefined, undefined] : positionals;
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra.slice(0, 40)}"`);
  if (pausing && (positionals.length !== 2 || !['handler', 'source', 'destination'].includes(positionals[0]!))) {
    throw new UsageError(`${command} takes what to ${command}: handler <name>, destination <name> or source <name> (got "${positionals.join(' ').slice(0, 80)}")`);
  }
  // A destination's runs are a handler's (its name): pausing one pauses that handler.
  const said = positionals[0];
  if (pausing && said === 'destination') positionals[0] = 'handler';
  if (pausing && !/^[a-z0-9][a-z0-9._-]{0,62}$/.test(positionals[1]!)) {
    throw new UsageError(`"${positionals[1]!.slice(0, 80)}" is not a ${positionals[0]} name (1-63 characters of a-z 0-9 . _ -)`);
  }
  if (command === 'paused' && positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]!.slice(0, 40)}"`);
  const flag = (name: string) => values[name] === true;
  const text = (name: string) => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
  // --destination NAME: a destination's runs are the runs of the handler of that name.
  if (text('destination') !== undefined) {
    if (pausing || command === 'show' || command === 'paused') usage(`${command} takes no --destination${pausing ? ` (write: ${command} destination <name>)` : ''}`);
    if (text('handler') !== undefined) usage('--handler and --destination name the same thing (a destination runs as the handler of its name): give one');
    values.handler = values.destination;
  }
  let exitCode = 0;
  const out = (value: unknown) => process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);
  {
    const state = text('state');
    if (state && !EVENT_STATES.includes(state as EventState)) usage(`--state must be one of ${EVENT_STATES.join(', ')}`);
    for (const name of ['provider', 'type', 'handler', 'reason', 'actor', 'steps']) {
      if (text(name)?.includes('\0')) usage(`--${name} must not contain a NUL character`);
    }
    const filter: EventFilter = {
      state: state as EventState | undefined,
      provider: text('provider'),
      type: text('type'),
      handler: text('handler'),
      olderThanSeconds: text('older-than') ? parseDuration(text('older-than')!) : undefined,
      limit: parseLimit(text('limit')),
    };
    const actor = text('actor') ?? process.env.USER ?? 'cli';
    const needReason = () => {
      const reason = text('reason')?.trim();
      if (!reason) usage(`${command} needs --reason "why" (it is recorded${pausing ? '' : ' with the event'})`);
      return reason;
    };
    const needTarget = () => {
      if (target === undefined) return usage(`${command} needs a row id or provider/event_id`);
      if (!/^\d{1,15}$/.test(target) && !/^[^/]{1,63}\/.{1,300}$/.test(target)) {
        return usage(`"${target.slice(0, 40)}" is neither a row id (1 to 15 digits) nor provider/event_id`);
      }
      return target;
    };

    await withOperations(env, async ({ ops }) => {
      switch (command) {
        case 'list': {
          const events = await ops.list(filter);
          if (flag('json')) out(events);
          else {
            out('row id   state       provider/event_id                          type                          updated                   runs');
            for (const e of events) out(formatEvent(e));
            out(`${events.length} event(s)`);
          }
          break;
        }
        case 'show': {
          const detail = await ops.show(needTarget());
          if (!detail) {
            out(`no event ${target}`);
            exitCode = 1;
          } else {
            // The payload as JSON when any printer can take it, its bounded text when not.
            const { payloadView, ...rest } = detail;
            out(payloadView.truncated ? detail : rest);
          }
          break;
        }
        case 'redrive':
        case 'replay': {
          const ref = needTarget();
          const dryRun = flag('dry-run');
          const reason = command === 'replay' && dryRun ? (text('reason') ?? 'dry run') : needReason();
          const detail = await ops.show(ref);
          if (!detail) {
            out(`no event ${ref}`);
            exitCode = 1;
            break;
          }
          const rowId = detail.event.id;
          if (command === 'redrive') {
            const result = await ops.redrive(rowId, { handler: text('handler') }, actor, reason);
            if (!result.ok) {
              out(`redrive refused: ${result.reason}`);
              exitCode = 1;
            } else if (result.dispatch) out(`redrive: event ${rowId} was never dispatched; its dispatch is enqueued`);
            else
              for (const run of result.runs)
                out(
                  `redrive: event ${rowId}, handler "${run.handler}" ${run.fromState} -> received (same generation ${run.generation}: committed steps skipped, same outbound keys); enqueued`,
                );
            break;
          }
          const steps = text('steps')
            ?.split(',')
            .map((s) => s.trim())
            .filter(Boolean);
          const result = await ops.replay(rowId, { handler: text('handler'), steps, allSteps: flag('all-steps'), dryRun }, actor, reason);
          if (!result.ok) {
            out(`replay refused: ${result.reason}`);
            exitCode = 1;
          } else out(flag('json') ? result : formatPlan(result.plan, result.dryRun));
          break;
        }
        case 'pause':
        case 'resume': {
          const reason = needReason();
          const what = { scope: positionals[0] as 'handler' | 'source', name: positionals[1]! };
          const word = said === 'destination' ? 'destination' : what.scope;
          if (command === 'pause') {
            const result = await ops.pause(what, actor, reason, { now: flag('now') });
            if (!result.ok) {
              out(`pause refused: ${result.reason}`);
              exitCode = 1;
            } else if (result.alreadyPaused)
              out(`${word} "${what.name}" was already paused by ${result.pause.actor} since ${new Date(result.pause.pausedAt).toISOString()}: ${result.pause.reason}`);
            else out(`paused ${word} "${what.name}": deliveries are still accepted; no new run starts until: oncehook resume ${word} ${what.name} --reason "..."`);
          } else {
            const result = await ops.resume(what, actor, reason);
            if (!result.ok) {
              out(`resume refused: ${result.reason}`);
              exitCode = 1;
            } else {
              out(`resumed ${word} "${what.name}" (paused since ${new Date(result.resumed.pausedAt).toISOString()}): ${result.released} waiting run(s) enqueued`);
              if (result.enqueueFailed > 0) out(`  ${result.enqueueFailed} could not be enqueued now (queue unreachable); the reconciler enqueues them`);
            }
          }
          break;
        }
        case 'paused': {
          const pauses = await ops.pauses();
          if (flag('json')) out(pauses);
          else {
            for (const p of pauses)
              out(`${p.scope.padEnd(8)} ${p.name.padEnd(30)} since ${new Date(p.pausedAt).toISOString()} by ${p.actor}, ${p.waiting ?? 0} run(s) waiting: ${p.reason}`);
            out(`${pauses.length} paused`);
          }
          break;
        }
        case 'redrive-all': {
          const dryRun = flag('dry-run');
          const reason = dryRun ? (text('reason') ?? 'dry run') : needReason();
          const result = await ops.bulkRedrive(filter, { dryRun, actor, reason });
          if (flag('json')) out(result);
          else {
            out(`${result.dryRun ? 'dry run: would re-drive' : 're-drove'} ${result.matched} event(s)${result.dryRun ? ' (nothing changed)' : ''}`);
            for (const r of result.results) out(r.ok ? `  ${r.rowId}` : `  ${r.rowId} refused: ${r.reason}`);
          }
          if (result.results.some((r) => !r.ok)) exitCode = 1;
          break;
        }
      }
    });
  }
  return exitCode;
}

/** The operator commands, for the `oncehook` dispatcher. */
export const operatorCommands: Command[] = Object.entries(COMMANDS).map(([name, spec]) => ({
  name,
  summary: spec.summary,
  usage: `oncehook ${spec.usage}`,
  help: spec.help,
  usesDevSession: true,
  run: (args, { env }) => operate(name, args, env),
}));
