/**
 * The operator CLI: `npm run oncehook -- <command> [options]`.
 *
 *   list        [--state S] [--provider P] [--type T] [--older-than 2h] [--limit N] [--json]
 *   show        <row id | provider/event_id>
 *   redrive     <row id | provider/event_id> --reason "..."   same generation, same keys
 *   replay      <row id | provider/event_id> --reason "..."   NEW generation, new keys, on purpose
 *   redrive-all [--state failed] [--provider P] [--type T] [--older-than D] [--limit N] --reason "..." [--dry-run]
 *
 * --actor names who acted (default: $USER). Exit codes: 0 done, 1 refused or not found, 2 usage.
 * Uses DATABASE_URL, REDIS_URL and QUEUE_PREFIX like the worker.
 */
import { parseArgs } from 'node:util';
import {
  createEventQueue,
  createOperations,
  createPool,
  createRedis,
  EVENT_STATES,
  loadCommonConfig,
  runMain,
  type EventFilter,
  type EventState,
} from '@oncehook/shared';

const USAGE = `usage: npm run oncehook -- <list|show|redrive|replay|redrive-all> [options]
  list        [--state S] [--provider P] [--type T] [--older-than 30m|2h|3d] [--limit N] [--json]
  show        <row id | provider/event_id>
  redrive     <row id | provider/event_id> --reason "why"
  replay      <row id | provider/event_id> --reason "why"
  redrive-all [--state failed] [--provider P] [--type T] [--older-than D] [--limit N] --reason "why" [--dry-run]`;

function usage(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

/** "90" (seconds), "30m", "2h", "3d" -> seconds. */
export function parseDuration(value: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(value.trim());
  if (!match) usage(`--older-than: "${value}" is not a duration (e.g. 90, 30m, 2h, 3d)`);
  const factor = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * factor;
}

runMain(async () => {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      state: { type: 'string' },
      provider: { type: 'string' },
      type: { type: 'string' },
      'older-than': { type: 'string' },
      limit: { type: 'string' },
      reason: { type: 'string' },
      actor: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const [command, target] = positionals;
  if (!command) usage('no command given');
  if (values.state && !EVENT_STATES.includes(values.state as EventState)) usage(`--state must be one of ${EVENT_STATES.join(', ')}`);
  const filter: EventFilter = {
    state: values.state as EventState | undefined,
    provider: values.provider,
    type: values.type,
    olderThanSeconds: values['older-than'] ? parseDuration(values['older-than']) : undefined,
    limit: values.limit ? Number(values.limit) : undefined,
  };
  const actor = values.actor ?? process.env.USER ?? 'cli';
  const needReason = () => values.reason ?? usage(`${command} needs --reason "why" (it is recorded with the event)`);

  const config = loadCommonConfig();
  const pool = createPool(config.DATABASE_URL, { max: 2, applicationName: 'oncehook-cli' });
  const redis = createRedis(config.REDIS_URL, 'producer');
  const queue = createEventQueue(redis, config.QUEUE_PREFIX);
  const ops = createOperations({ pool, queue });
  const out = (value: unknown) => process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);
  let exitCode = 0;
  try {
    switch (command) {
      case 'list': {
        const events = await ops.list(filter);
        if (values.json) out(events);
        else {
          out('row id   state       attempts gen provider/event_id                          type                          updated');
          for (const e of events) {
            out(`${String(e.id).padEnd(8)} ${e.state.padEnd(11)} ${String(e.attempts).padEnd(8)} ${String(e.generation).padEnd(3)} ${`${e.provider}/${e.eventId}`.padEnd(42)} ${e.type.padEnd(29)} ${e.updatedAt.toISOString()}${e.lastError ? `\n         last error: ${e.lastError}` : ''}`);
          }
          out(`${events.length} event(s)`);
        }
        break;
      }
      case 'show': {
        if (!target) usage('show needs a row id or provider/event_id');
        const detail = await ops.show(target);
        if (!detail) {
          out(`no event ${target}`);
          exitCode = 1;
        } else out(detail);
        break;
      }
      case 'redrive':
      case 'replay': {
        if (!target) usage(`${command} needs a row id or provider/event_id`);
        const reason = needReason();
        const detail = await ops.show(target);
        if (!detail) {
          out(`no event ${target}`);
          exitCode = 1;
          break;
        }
        const result = command === 'redrive' ? await ops.redrive(detail.event.id, actor, reason) : await ops.replay(detail.event.id, actor, reason);
        if (result.ok) out(`${command}: event ${result.rowId} ${result.fromState} -> received${result.generation !== undefined ? ` (generation ${result.generation}: new outbound keys)` : ' (same generation: same outbound keys)'}; enqueued`);
        else {
          out(`${command} refused: ${result.reason}`);
          exitCode = 1;
        }
        break;
      }
      case 'redrive-all': {
        const reason = values['dry-run'] ? (values.reason ?? 'dry run') : needReason();
        const result = await ops.bulkRedrive(filter, { dryRun: values['dry-run'], actor, reason });
        if (values.json) out(result);
        else {
          out(`${result.dryRun ? 'dry run: would re-drive' : 're-drove'} ${result.matched} event(s)${result.dryRun ? ' (nothing changed)' : ''}`);
          for (const r of result.results) out(r.ok ? `  ${r.rowId} (${r.fromState})` : `  ${r.rowId} refused: ${r.reason}`);
        }
        if (result.results.some((r) => !r.ok)) exitCode = 1;
        break;
      }
      default:
        usage(`unknown command "${command}"`);
    }
  } finally {
    await queue.close();
    redis.disconnect();
    await pool.end();
  }
  process.exit(exitCode);
});
