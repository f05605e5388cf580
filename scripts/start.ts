/**
 * `npm start`: the whole stack on this machine, in the foreground, for trying Oncehook and
 * developing handlers. Not how production runs (docs/operating.md, "Deploying").
 *
 * 1. Reads the environment (the shell, `.env.local`, local development defaults:
 *    scripts/local-env.ts) and checks it as each process will.
 * 2. Checks what starting needs, and stops with one line on stderr naming the cause and the
 *    variable when something is missing: Postgres reachable at DATABASE_URL, Redis at
 *    REDIS_URL (unless QUEUE_BACKEND=postgres), the ports free (PORT, SANDBOX_PORT,
 *    METRICS_PORT and the next ones).
 * 3. Migrates (creating the database if missing): Oncehook's tables and the example shop's.
 * 4. Starts the sandbox APIs, ingest and WORKERS workers (default 2) running the example shop
 *    (ONCEHOOK_HANDLERS, default examples/shop), with readable logs (LOG_FORMAT=pretty), and
 *    prints the banner only when every one of them is ready.
 * 5. Ctrl-C (or SIGTERM) stops them all gracefully; if one dies, the others are stopped and
 *    the exit code is 1.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ConfigError } from '@oncehook/sdk';
import { loadIngestConfig, loadWorkerConfig } from '@oncehook/shared';
import { localEnv, ROOT } from './local-env';

class StartError extends Error {}

const say = (line: string) => process.stderr.write(`oncehook: ${line}\n`);

function describe(error: unknown): string {
  const e = error as NodeJS.ErrnoException & { errors?: NodeJS.ErrnoException[] };
  const code = e.code ?? e.errors?.[0]?.code;
  return code ? `${code}${e.message && !e.message.includes(code) ? ` (${e.message})` : ''}` : (e.message ?? String(error));
}

/** host:port of a URL, for messages (never the password). */
function where(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || (u.protocol.startsWith('redis') ? '6379' : '5432')}`;
  } catch {
    return url;
  }
}

async function checkPostgres(databaseUrl: string): Promise<void> {
  // The server, not the database: `migrate` creates a missing database.
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 3_000 });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    throw new StartError(
      `cannot reach Postgres at ${where(databaseUrl)} (DATABASE_URL): ${describe(error).replace(/\.$/, '')}. Start it (Debian: pg_ctlcluster ${process.env.PG_VERSION ?? '15'} main start; Docker: docker compose up -d postgres) or set DATABASE_URL`,
    );
  } finally {
    await client.end().catch(() => {});
  }
}

async function checkRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 3_000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  let cause: unknown;
  redis.on('error', (error) => {
    cause ??= error;
  });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new StartError(
      `cannot reach Redis at ${where(redisUrl)} (REDIS_URL): ${describe(cause ?? error).replace(/\.$/, '')}. Start it (redis-server --daemonize yes --port 6379; Docker: docker compose up -d redis), set REDIS_URL, or run without Redis: QUEUE_BACKEND=postgres`,
    );
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
        new StartError(
          error.code === 'EADDRINUSE'
            ? `port ${port} is already in use (${variable}): stop what uses it (another npm start?), or set ${variable} to a free port`
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
}

/** Starts `node --import tsx <entry>`, relays its output, and resolves `ready` with the first line matching. */
function start(name: string, entry: string, env: Record<string, string>, readyLine: RegExp, args: string[] = []): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const ready = new Promise<string>((resolve, reject) => {
    const lines: string[] = [];
    let found = false;
    const onData = (chunk: Buffer, to: NodeJS.WriteStream) => {
      to.write(chunk);
      if (found) return;
      for (const line of chunk.toString('utf8').split('\n')) {
        lines.push(line);
        const match = readyLine.exec(line);
        if (match) {
          found = true;
          resolve(line);
          return;
        }
      }
    };
    proc.stdout?.on('data', (chunk: Buffer) => onData(chunk, process.stdout));
    proc.stderr?.on('data', (chunk: Buffer) => onData(chunk, process.stderr));
    proc.on('exit', (code, signal) => {
      if (!found) reject(new StartError(`${name} exited (${signal ?? `code ${code}`}) before it was ready; its output is above`));
    });
  });
  return { name, proc, ready };
}

async function main(): Promise<number> {
  const base = localEnv();
  const generatedPassword = base.ADMIN_PASSWORD === undefined && base.ADMIN_TOKEN === undefined;
  const env: Record<string, string> = {
    LOG_FORMAT: 'pretty',
    ONCEHOOK_HANDLERS: 'examples/shop',
    // The admin, for this session only (printed below): a fresh password each start.
    ...(generatedPassword ? { ADMIN_USERNAME: 'admin', ADMIN_PASSWORD: randomBytes(9).toString('base64url') } : {}),
    ...base,
  };
  const workers = Number(env.WORKERS ?? '2');
  if (!Number.isInteger(workers) || workers < 1 || workers > 16) throw new StartError(`WORKERS must be a whole number from 1 to 16 (got "${env.WORKERS}")`);
  const sandboxPort = Number(env.SANDBOX_PORT ?? '4010');
  const host = env.HOST ?? '127.0.0.1';
  env.HOST = host;

  // The configuration each process will read, checked now (a bad value stops here, named).
  const ingestConfig = loadIngestConfig(env);
  const workerConfig = loadWorkerConfig(env);

  await checkPostgres(ingestConfig.DATABASE_URL);
  // QUEUE_BACKEND=postgres: the queue lives in DATABASE_URL, no Redis to check.
  if (ingestConfig.QUEUE_BACKEND === 'redis') await checkRedis(ingestConfig.REDIS_URL);
  await checkPort(ingestConfig.PORT, host, 'PORT');
  await checkPort(sandboxPort, host, 'SANDBOX_PORT');
  for (let i = 0; i < workers; i += 1) {
    if (workerConfig.METRICS_PORT !== 0)
      await checkPort(workerConfig.METRICS_PORT + i, workerConfig.METRICS_HOST, i === 0 ? 'METRICS_PORT' : `METRICS_PORT (+${i}, worker ${i + 1})`);
  }

  const children: Child[] = [];
  let stopping = false;
  const stopAll = async () => {
    stopping = true;
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
  };

  const migrate = start('migrate', 'packages/oncehook/src/cli/migrate-command.ts', env, /(?!)/, ['--set', 'shop', '--dir', 'examples/shop/migrations']);
  migrate.ready.catch(() => {}); // never "ready": it exits
  const migrated = await new Promise<number | null>((resolve) => migrate.proc.on('exit', (code) => resolve(code)));
  if (migrated !== 0) throw new StartError(`migrate failed (exit ${migrated}); its output is above`);

  const sandbox = start('sandbox', 'apps/sandbox/src/server.ts', { ...env, SANDBOX_PORT: String(sandboxPort) }, /sandbox listening on (\d+)/);
  children.push(sandbox);
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    say('stopping (Ctrl-C again does nothing; the processes finish what they are doing)');
    void stopAll();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const sandboxLine = await sandbox.ready;
    const sandboxUrl = `http://127.0.0.1:${/listening on (\d+)/.exec(sandboxLine)?.[1]}`;
    const shopUrls = {
      SHOP_PAYMENT_API_URL: env.SHOP_PAYMENT_API_URL ?? `${sandboxUrl}/payment`,
      SHOP_EMAIL_API_URL: env.SHOP_EMAIL_API_URL ?? `${sandboxUrl}/email`,
      SHOP_FULFILMENT_API_URL: env.SHOP_FULFILMENT_API_URL ?? `${sandboxUrl}/fulfilment`,
    };
    const ingest = start('ingest', 'apps/ingest/src/server.ts', env, /ingest listening on (\d+)/);
    children.push(ingest);
    for (let i = 0; i < workers; i += 1) {
      const metricsPort = workerConfig.METRICS_PORT === 0 ? 0 : workerConfig.METRICS_PORT + i;
      children.push(start(`worker ${i + 1}`, 'apps/worker/src/main.ts', { ...env, ...shopUrls, METRICS_PORT: String(metricsPort) }, /worker ready/));
    }
    const [ingestLine] = await Promise.all([ingest.ready, ...children.slice(2).map((c) => c.ready)]);
    const port = /listening on (\d+)/.exec(ingestLine)?.[1];
    const url = `http://127.0.0.1:${port}`;
    process.stdout.write(
      [
        '',
        `oncehook is up: ingest ${url}, ${workers} worker(s) running ${env.ONCEHOOK_HANDLERS}, sandbox APIs ${sandboxUrl}${ingestConfig.QUEUE_BACKEND === 'postgres' ? ', the queue in Postgres (no Redis)' : ''}`,
        `  send a signed test event:  npm run send -- stripe payment_intent.succeeded${port === '3000' ? '' : ` --url ${url}`}`,
        `  look at events:            npm run oncehook -- list`,
        generatedPassword
          ? `  admin:                     ${url}/admin  (user admin, password ${env.ADMIN_PASSWORD}: this session only; set ADMIN_PASSWORD to choose)`
          : `  admin:                     ${url}/admin`,
        '  Ctrl-C stops everything.',
        '',
      ].join('\n'),
    );
  } catch (error) {
    await stopAll();
    if (interrupted) return 0; // Ctrl-C while starting
    throw error;
  }

  // Run until Ctrl-C, or until one process dies (then stop the rest: a half stack misleads).
  return new Promise<number>((resolve) => {
    for (const child of children) {
      child.proc.once('exit', (code, signal) => {
        if (stopping) {
          if (children.every((c) => c.proc.exitCode !== null || c.proc.signalCode !== null)) resolve(interrupted ? 0 : 1);
          return;
        }
        say(`${child.name} exited (${signal ?? `code ${code}`}); stopping the others`);
        void stopAll().then(() => resolve(1));
      });
    }
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof StartError || error instanceof ConfigError) {
      say(error.message);
      process.exit(1);
    }
    say(`failed: ${(error as Error).stack ?? String(error)}`);
    process.exit(1);
  },
);
