/**
 * `oncehook dev`: everything in one terminal, on your own handlers, for developing them. Not
 * how production runs (`oncehook ingest` and `oncehook worker`, configured; docs/use-in-your-project.md).
 *
 * 1. The environment: the shell over .env.local over .env, then development defaults for what
 *    is unset: a development secret per built-in provider (dev-env.ts; `oncehook send` signs
 *    with the same), readable logs, an admin password for this session.
 * 2. Postgres: DATABASE_URL when set (it must answer); else 127.0.0.1:5432 when something
 *    answers there; else an embedded Postgres with its data in `.oncehook/` (embedded-postgres.ts),
 *    and the queue in it (QUEUE_BACKEND=postgres): Node alone is enough.
 * 3. The queue: Redis at REDIS_URL (default 127.0.0.1:6379) unless QUEUE_BACKEND says
 *    otherwise; when REDIS_URL is not set and nothing answers there, the queue goes in Postgres
 *    for this session (it says so). A REDIS_URL that does not answer is an error.
 * 4. Stand-ins (`--stand-in NOTIFY_API_URL`): for each variable your handlers read an API's URL
 *    from that is not set, a stand-in API on 127.0.0.1 (4020, then 4021, ...; `VAR=PORT` to
 *    choose), the variable pointed at it: it answers every call 200 with an id, honours
 *    idempotency keys as real APIs do, and each call is printed. A first event runs end to end
 *    before your API exists; set the variable (.env.local) to use your own.
 * 5. Migrates (Oncehook's tables and each --dir of yours), starts ingest and --workers workers
 *    (child processes: `oncehook ingest`, `oncehook worker`), relays their output, and prints
 *    how to reach everything once each one is ready. Ctrl-C stops them all; if one dies, the
 *    others are stopped and the exit code is 1.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { checkRedisMode } from '@oncehook/core';
import { StartupError, startStandInApi, type StandInApi } from '@oncehook/shared';
import { fixtureTypes, sourceDeclarations } from '@oncehook/providers';
import { loadIngestConfig, loadWorkerConfig } from '../config.js';
import { type Command, type CommandContext, invocation, UsageError } from './command.js';
import { where } from './connections.js';
import { withDevSecrets } from './dev-env.js';
import { DEV_SESSION_FILE, removeDevSession, writeDevSession } from './env-files.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from './embedded-postgres.js';
import { migrateCommand } from './migrate-command.js';

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/oncehook';
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/** The first stand-in's port (docs/use-in-your-project.md and the starter name it). */
export const STAND_IN_PORT = 4020;

const say = (line: string) => process.stderr.write(`oncehook: ${line}\n`);

function describe(error: unknown): string {
  const e = error as NodeJS.ErrnoException & { errors?: NodeJS.ErrnoException[] };
  const code = e.code ?? e.errors?.[0]?.code;
  return code ? `${code}${e.message && !e.message.includes(code) ? ` (${e.message})` : ''}` : (e.message ?? String(error));
}

/** null when the Postgres server of `databaseUrl` answers, else why not. */
async function postgresProblem(databaseUrl: string): Promise<string | null> {
  // The server, not the database: migrate creates a missing database.
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 3_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return null;
  } catch (error) {
    return describe(error).replace(/\.$/, '');
  } finally {
    await client.end().catch(() => {});
  }
}

/** null when Redis at `redisUrl` answers PING, else why not. */
async function redisProblem(redisUrl: string): Promise<string | null> {
  const redis = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 3_000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  let cause: unknown;
  redis.on('error', (error) => {
    cause ??= error;
  });
  try {
    await redis.connect();
    await redis.ping();
    return null;
  } catch (error) {
    return describe(cause ?? error).replace(/\.$/, '');
  } finally {
    redis.disconnect();
  }
}

async function checkPort(port: number, host: string, variable: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new StartupError(
          error.code === 'EADDRINUSE'
            ? `port ${port} is already in use (${variable}): stop what uses it (another oncehook dev?), or set ${variable} to a free port`
            : `cannot listen on port ${port} (${variable}): ${describe(error)}`,
        ),
      ),
    );
    server.listen(port, host, () => server.close(() => resolve()));
  });
}

interface Child {
  name: string;
  proc: ChildProcess;
  ready: Promise<string>;
  /** Every line it printed so far. */
  lines: string[];
}

/** Runs `oncehook <args>` as a child, relays its output, resolves `ready` with the first line matching. */
function startChild(context: CommandContext, name: string, args: string[], env: Record<string, string>, readyLine: RegExp): Child {
  const [node, ...flags] = context.self;
  const proc = spawn(node!, [...flags, ...args], { cwd: context.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const ready = new Promise<string>((resolve, reject) => {
    let found = false;
    const onData = (chunk: Buffer, to: NodeJS.WriteStream) => {
      to.write(chunk);
      if (found) return;
      for (const line of chunk.toString('utf8').split('\n')) {
        lines.push(line);
        if (readyLine.test(line)) {
          found = true;
          resolve(line);
          return;
        }
      }
    };
    proc.stdout?.on('data', (chunk: Buffer) => onData(chunk, process.stdout));
    proc.stderr?.on('data', (chunk: Buffer) => onData(chunk, process.stderr));
    proc.on('exit', (code, signal) => {
      if (!found) reject(new StartupError(`${name} exited (${signal ?? `code ${code}`}) before it was ready; its output is above`));
    });
  });
  return { name, proc, ready, lines };
}

/**
 * The first test event to suggest: a type one of the loaded handlers takes (from the worker's
 * `handler <name> takes <source> <type>` lines), with a built-in payload when there is one;
 * else `--file`; with no handler loaded, Stripe's first built-in (recorded, no effect).
 */
function suggestedSend(workerLines: string[], env: Record<string, string>): string {
  const declarations = sourceDeclarations(loadIngestConfig(env));
  const taken = workerLines.flatMap((line) => {
    const match = /oncehook: handler \S+ takes (\S+) (\S+)/.exec(line);
    return match ? [{ source: match[1]!, type: match[2]! }] : [];
  });
  for (const { source, type } of taken) {
    const declaration = declarations.find((d) => d.name === source);
    if (declaration && fixtureTypes(declaration.kind).includes(type)) return `send ${source} ${type}`;
  }
  const first = taken.find(({ source }) => declarations.some((d) => d.name === source));
  if (first) return `send ${first.source} --file ${first.type.replace(/[^A-Za-z0-9._-]/g, '_')}.json   (your ${first.type} payload: no built-in one)`;
  return 'send stripe payment_intent.succeeded';
}

/** Where the development database is: configured, local, or embedded (started here). */
async function chooseDatabase(
  env: Record<string, string>,
  context: CommandContext,
  origin: string | undefined,
): Promise<{ url: string; embedded: EmbeddedPostgres | null; note: string }> {
  if (env.DATABASE_URL) {
    const problem = await postgresProblem(env.DATABASE_URL);
    if (problem)
      throw new StartupError(
        `cannot reach Postgres at ${where(env.DATABASE_URL)} (DATABASE_URL, from ${origin ?? 'the environment'}): ${problem}. Start it, or unset DATABASE_URL to use a local or embedded one`,
      );
    return { url: env.DATABASE_URL, embedded: null, note: `Postgres at ${where(env.DATABASE_URL)} (DATABASE_URL)` };
  }
  if ((await postgresProblem(DEFAULT_DATABASE_URL)) === null) return { url: DEFAULT_DATABASE_URL, embedded: null, note: 'Postgres at 127.0.0.1:5432' };
  say('no DATABASE_URL and no Postgres at 127.0.0.1:5432: starting an embedded Postgres (its data in .oncehook/postgres)');
  const embedded = await startEmbeddedPostgres(context.cwd, say);
  say(`embedded Postgres ${embedded.created ? 'created and ' : ''}started in ${embedded.dataDir}, on 127.0.0.1:${embedded.port} (delete .oncehook/ to start over)`);
  return { url: embedded.url, embedded, note: `an embedded Postgres (${embedded.dataDir})` };
}

export function devOptions(args: string[]) {
  try {
    const { values } = parseArgs({
      args,
      options: {
        handlers: { type: 'string', multiple: true },
        workers: { type: 'string' },
        dir: { type: 'string', multiple: true },
        set: { type: 'string', multiple: true },
        'stand-in': { type: 'string', multiple: true },
      },
    });
    const workers = values.workers === undefined ? undefined : Number(values.workers);
    if (workers !== undefined && (!Number.isInteger(workers) || workers < 1 || workers > 16))
      throw new UsageError(`--workers must be a whole number from 1 to 16 (got "${values.workers}")`);
    const migrateArgs = [...(values.dir ?? []).flatMap((d) => ['--dir', d]), ...(values.set ?? []).flatMap((s) => ['--set', s])];
    const standIns = (values['stand-in'] ?? []).map((given, i) => {
      const match = /^([A-Z][A-Z0-9_]{0,63})(?:=(\d{1,5}))?$/.exec(given);
      if (!match)
        throw new UsageError(
          `--stand-in "${given.slice(0, 40)}": give the variable your handler reads the API's URL from, e.g. --stand-in NOTIFY_API_URL (or NOTIFY_API_URL=4020)`,
        );
      const port = match[2] === undefined ? STAND_IN_PORT + i : Number(match[2]);
      if (port < 1 || port > 65535) throw new UsageError(`--stand-in ${given}: the port must be from 1 to 65535`);
      return { variable: match[1]!, port };
    });
    return { handlers: values.handlers, workers, migrateArgs, standIns };
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError((error as Error).message);
  }
}

export const devCommand: Command = {
  name: 'dev',
  summary: 'everything in one terminal on your handlers: Postgres (embedded if need be), migrate, ingest, workers',
  usage: 'oncehook dev [--handlers ./src/webhooks] [--workers 2] [--dir ./migrations [--set app]]... [--stand-in VAR[=PORT]]...',
  help: `For developing handlers. Reads the environment (the shell, .env.local, .env), gives every
built-in provider without a configured secret a development secret (oncehook send signs with
the same), finds a Postgres (DATABASE_URL; else 127.0.0.1:5432; else an embedded one with its
data in .oncehook/, the queue then in it too), migrates (Oncehook's tables and each --dir of
yours), starts ingest and --workers workers (default 2; WORKERS) running --handlers (or
ONCEHOOK_HANDLERS), and prints where everything is. Ctrl-C stops everything.
--stand-in NOTIFY_API_URL: when that variable is not set, a stand-in API on 127.0.0.1:${STAND_IN_PORT}
(the next ones on ${STAND_IN_PORT + 1}, ...; VAR=PORT to choose) answers your handler's calls (200 with
an id, idempotency keys honoured, each call printed), the variable pointed at it; set the
variable (.env.local) to call your own API instead.
Then, in another terminal: npx oncehook send <source> <type> (the banner suggests a type your
handlers take)`,
  async run(args, context) {
    const options = devOptions(args);
    const base = withDevSecrets(context.env);
    const generatedPassword = base.ADMIN_PASSWORD === undefined && base.ADMIN_TOKEN === undefined && base.ADMIN_TOKENS === undefined;
    const env: Record<string, string> = {
      LOG_FORMAT: 'pretty',
      HOST: '127.0.0.1',
      ...(generatedPassword ? { ADMIN_USERNAME: 'admin', ADMIN_PASSWORD: randomBytes(9).toString('base64url') } : {}),
      ...base,
      ...(options.handlers ? { ONCEHOOK_HANDLERS: options.handlers.join(',') } : {}),
    };
    const workers = options.workers ?? Number(env.WORKERS ?? '2');
    if (!Number.isInteger(workers) || workers < 1 || workers > 16) throw new StartupError(`WORKERS must be a whole number from 1 to 16 (got "${env.WORKERS}")`);

    const database = await chooseDatabase(env, context, context.env.DATABASE_URL === undefined ? undefined : 'the environment');
    env.DATABASE_URL = database.url;
    let queueNote: string;
    if (database.embedded && env.QUEUE_BACKEND === undefined) {
      env.QUEUE_BACKEND = 'postgres';
      queueNote = 'the queue in that Postgres';
    } else if ((env.QUEUE_BACKEND ?? 'redis') === 'redis' && env.REDIS_CLUSTER_NODES) {
      queueNote = 'the queue on the Redis Cluster of REDIS_CLUSTER_NODES';
    } else if ((env.QUEUE_BACKEND ?? 'redis') === 'redis') {
      const redisUrl = env.REDIS_URL ?? DEFAULT_REDIS_URL;
      const problem = await redisProblem(redisUrl);
      if (problem && env.REDIS_URL !== undefined) {
        throw new StartupError(`cannot reach Redis at ${where(redisUrl)} (REDIS_URL): ${problem}. Start it, unset REDIS_URL, or run without Redis: QUEUE_BACKEND=postgres`);
      }
      if (problem) {
        env.QUEUE_BACKEND = 'postgres';
        queueNote = `the queue in Postgres (no Redis at ${where(redisUrl)}; start one, or keep it this way: QUEUE_BACKEND=postgres)`;
      } else queueNote = `the queue in Redis at ${where(redisUrl)}`;
    } else queueNote = 'the queue in Postgres (QUEUE_BACKEND=postgres)';

    // The configuration each process will read, checked now (a bad value stops here, named).
    const ingestConfig = loadIngestConfig(env);
    const workerConfig = loadWorkerConfig(env);
    // One node of a Redis Cluster named as REDIS_URL (or a plain Redis as the cluster) is refused here, named.
    await checkRedisMode(ingestConfig);
    await checkPort(ingestConfig.PORT, ingestConfig.HOST, 'PORT');
    for (let i = 0; i < workers; i += 1) {
      if (workerConfig.METRICS_PORT !== 0)
        await checkPort(workerConfig.METRICS_PORT + i, workerConfig.METRICS_HOST, i === 0 ? 'METRICS_PORT' : `METRICS_PORT (+${i}, worker ${i + 1})`);
    }

    // Stand-ins for the APIs the handlers call, for variables nobody set.
    const standIns: { variable: string; api: StandInApi }[] = [];
    for (const { variable, port } of options.standIns) {
      if (env[variable] !== undefined) {
        say(`${variable} is set (${env[variable]}): your handlers call it; no stand-in for it`);
        continue;
      }
      await checkPort(port, '127.0.0.1', `--stand-in ${variable}=${port}`);
      const api = await startStandInApi({
        port,
        onAnswer: (request, answer) =>
          say(
            `stand-in ${variable}: ${request.method} ${request.path}${request.key ? ` (key ${request.key})` : ''} -> ${answer.status}${answer.replayed ? ' (the stored answer: a repeat of the key)' : ''}`,
          ),
      });
      env[variable] = api.url;
      standIns.push({ variable, api });
    }

    const children: Child[] = [];
    let stopping = false;
    let interrupted = false;
    const stopAll = async () => {
      stopping = true;
      removeDevSession(context.cwd);
      const alive = children.filter((c) => c.proc.exitCode === null && c.proc.signalCode === null);
      await Promise.all(
        alive.map(
          (c) =>
            new Promise<void>((resolve) => {
              c.proc.once('exit', () => resolve());
              c.proc.kill('SIGTERM');
            }),
        ),
      );
      await database.embedded?.stop().catch((error: unknown) => say(`the embedded Postgres did not stop cleanly: ${describe(error)}`));
      await Promise.all(standIns.map(({ api }) => api.close()));
    };
    const onSignal = () => {
      if (interrupted) return;
      interrupted = true;
      say('stopping (Ctrl-C again does nothing; the processes finish what they are doing)');
      void stopAll().then(() => process.exit(0));
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);

    try {
      const migrated = await migrateCommand.run(options.migrateArgs, { ...context, env });
      if (migrated !== 0) throw new StartupError(`migrate failed (exit ${migrated})`);
      const ingest = startChild(context, 'ingest', ['ingest'], env, /ingest listening on (\d+)/);
      children.push(ingest);
      for (let i = 0; i < workers; i += 1) {
        const metricsPort = workerConfig.METRICS_PORT === 0 ? 0 : workerConfig.METRICS_PORT + i;
        children.push(startChild(context, `worker ${i + 1}`, ['worker'], { ...env, METRICS_PORT: String(metricsPort) }, /worker ready/));
      }
      const [ingestLine] = await Promise.all(children.map((c) => c.ready));
      const port = /listening on (\d+)/.exec(ingestLine ?? '')?.[1];
      const url = `http://127.0.0.1:${port}`;
      // Where this stack is, for list, show, send ... in another terminal (removed by stopAll).
      const session: Record<string, string> = { DATABASE_URL: env.DATABASE_URL, ONCEHOOK_DEV_URL: url };
      for (const key of ['QUEUE_BACKEND', 'REDIS_URL', 'REDIS_CLUSTER_NODES', 'QUEUE_PREFIX', 'QUEUE_SHARDS', 'ONCEHOOK_SCHEMA'] as const)
        if (env[key] !== undefined) session[key] = env[key];
      writeDevSession(context.cwd, session);
      process.stdout.write(
        [
          '',
          `oncehook is up: ingest ${url}, ${workers} worker(s) running ${env.ONCEHOOK_HANDLERS || 'no handler module (--handlers)'}; ${database.note}, ${queueNote}`,
          `  send a signed test event:  ${invocation(context.env)} ${suggestedSend(children[1]?.lines ?? [], env)}`,
          `  look at events:            ${invocation(context.env)} list   (other terminals find this stack in ${DEV_SESSION_FILE})`,
          generatedPassword
            ? `  admin:                     ${url}/admin  (user admin, password ${env.ADMIN_PASSWORD}: this session only; set ADMIN_PASSWORD to choose)`
            : `  admin:                     ${url}/admin`,
          ...standIns.map(({ variable, api }) => `  stand-in API:              ${variable}=${api.url}  (answers 200 with an id; set ${variable} to use your own)`),
          '  Ctrl-C stops everything.',
          '',
        ].join('\n'),
      );
    } catch (error) {
      await stopAll();
      if (interrupted) return 0;
      throw error;
    }

    // Run until Ctrl-C, or until one process dies (then stop the rest: a half stack misleads).
    return new Promise<number>((resolve) => {
      for (const child of children) {
        child.proc.once('exit', (code, signal) => {
          if (stopping) return;
          say(`${child.name} exited (${signal ?? `code ${code}`}); stopping the others`);
          void stopAll().then(() => resolve(1));
        });
      }
    });
  },
};
