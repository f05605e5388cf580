/**
 * A Redis server of the test's own, on its own port, without persistence: restarting it is
 * exactly "Redis lost everything". Never touches the shared Redis on 6379.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './net.js';
import { waitFor } from './wait.js';

export interface OwnRedis {
  port: number;
  url: string;
  /** kill -9 the server (all data is gone). */
  kill9(): Promise<void>;
  /** Start it again on the same port, empty. */
  start(): Promise<void>;
  /** SIGSTOP: connections stay open, nothing answers (a hung server, a partition without resets). */
  pause(): void;
  /** SIGCONT: answers again, including what was sent meanwhile. */
  resume(): void;
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  let proc: ChildProcess | undefined;

  async function start() {
    proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    await waitFor(
      async () => {
        const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        client.on('error', () => {});
        try {
          await client.connect();
          return (await client.ping()) === 'PONG';
        } catch {
          return false;
        } finally {
          client.disconnect();
        }
      },
      { timeoutMs: 10_000, what: `redis-server on ${port}` },
    );
  }

  async function kill9() {
    const current = proc;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const gone = new Promise((resolve) => current.on('exit', resolve));
    current.kill('SIGKILL');
    await gone;
  }

  await start();
  return { port, url: `redis://127.0.0.1:${port}`, kill9, start, pause: () => proc?.kill('SIGSTOP'), resume: () => proc?.kill('SIGCONT') };
}
