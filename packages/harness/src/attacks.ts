/**
 * The attacks of issue 10 as reusable pieces, for the regression tests and for
 * `npm run attack` (which measures a running ingest, this checkout's or an older one's):
 *
 * - slowBodies: many raw sockets that declare a large body and trickle part of it;
 * - blackhole: a TCP port that forwards to Postgres, or accepts and never answers.
 *
 * (Memory of the process under attack: process-memory.ts.)
 */
import { spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { waitFor } from './wait.js';

export interface SlowBodyOptions {
  host: string;
  port: number;
  path: string;
  connections: number;
  /** Content-Length declared. */
  declaredBytes: number;
  /** Bytes actually sent, in chunks, slowly. */
  sentBytes: number;
  chunkBytes?: number;
  chunkEveryMs?: number;
  /** Extra request headers (e.g. a well-formed signature header). */
  headers?: Record<string, string>;
  /** Connections opened per 10 ms (a burst of thousands at once overflows the listen backlog). */
  openRate?: number;
}

export interface SlowBodyResult {
  /** Answers by status (the status line, when the server answered before closing). */
  statuses: Record<string, number>;
  /** Per connection, ms from connect to close; null if still open when the run ended. */
  closedAfterMs: (number | null)[];
  /** Per connection: ms from opening to the first byte of its answer (null: never answered). */
  answeredAfterMs: (number | null)[];
  /** Connections refused or reset before the request was written. */
  failedToConnect: number;
}

/**
 * Opens `connections` sockets, each sending a POST that declares `declaredBytes` and then
 * trickles `sentBytes` (chunkBytes every chunkEveryMs), and waits until every socket is closed
 * or `giveUpAfterMs` passed (then destroys the rest, recorded as null).
 */
export async function slowBodies(options: SlowBodyOptions, giveUpAfterMs: number): Promise<SlowBodyResult> {
  const chunk = Buffer.alloc(options.chunkBytes ?? 16 * 1024, 0x7b);
  const every = options.chunkEveryMs ?? 500;
  const statuses: Record<string, number> = {};
  const closedAfterMs: (number | null)[] = [];
  const answeredAfterMs: (number | null)[] = [];
  let failedToConnect = 0;
  const sockets: Socket[] = [];
  const head = [
    `POST ${options.path} HTTP/1.1`,
    `Host: ${options.host}:${options.port}`,
    'Content-Type: application/json',
    `Content-Length: ${options.declaredBytes}`,
    ...Object.entries(options.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');

  const one = (index: number) =>
    new Promise<void>((resolve) => {
      const opened = Date.now();
      let sent = 0;
      let answered = false;
      let timer: NodeJS.Timeout | undefined;
      const socket = connect({ host: options.host, port: options.port });
      sockets.push(socket);
      socket.setNoDelay(true);
      const done = (closed: boolean) => {
        if (closedAfterMs[index] !== undefined) return;
        clearInterval(timer);
        closedAfterMs[index] = closed ? Date.now() - opened : null;
        resolve();
      };
      socket.on('connect', () => {
        socket.write(head);
        timer = setInterval(() => {
          if (sent >= options.sentBytes || socket.destroyed) return clearInterval(timer);
          sent += chunk.length;
          socket.write(chunk);
        }, every);
      });
      socket.on('data', (data: Buffer) => {
        if (answered) return;
        answered = true;
        answeredAfterMs[index] = Date.now() - opened;
        const status = /^HTTP\/1\.1 (\d{3})/.exec(data.toString('latin1'))?.[1] ?? 'garbled';
        statuses[status] = (statuses[status] ?? 0) + 1;
      });
      socket.on('error', (error: NodeJS.ErrnoException) => {
        if (!socket.bytesWritten && (error.code === 'ECONNREFUSED' || error.code === 'ECONNRESET')) failedToConnect += 1;
      });
      socket.on('close', () => done(true));
    });

  const all: Promise<void>[] = [];
  const rate = options.openRate ?? 100;
  for (let i = 0; i < options.connections; i += 1) {
    all.push(one(i));
    if ((i + 1) % rate === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  let giveUp: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(all),
    new Promise<void>((resolve) => {
      giveUp = setTimeout(resolve, giveUpAfterMs);
    }),
  ]);
  clearTimeout(giveUp);
  for (let i = 0; i < options.connections; i += 1) {
    if (closedAfterMs[i] === undefined) closedAfterMs[i] = null;
    if (answeredAfterMs[i] === undefined) answeredAfterMs[i] = null;
  }
  for (const socket of sockets) socket.destroy();
  return { statuses, closedAfterMs, answeredAfterMs, failedToConnect };
}

export interface Blackhole {
  port: number;
  /** Forward new and open connections to the target (the database is reachable). */
  forward(): void;
  /** Accept connections and never answer; stop relaying open ones (packets vanish). */
  swallow(): void;
  close(): Promise<void>;
}

/**
 * A TCP port in front of a real server (Postgres) that can turn into a black hole: in
 * `swallow` mode new connections are accepted and never answered, and bytes on open ones are
 * no longer relayed in either direction, as when a network path drops packets. `forward`
 * restores relaying (connections opened during the outage stay dead, as after a real one).
 */
export async function startBlackhole(target: { host: string; port: number }): Promise<Blackhole> {
  let swallowing = false;
  const pairs = new Set<{ client: Socket; upstream: Socket | null }>();
  const server: Server = createServer((client) => {
    const pair = { client, upstream: null as Socket | null };
    pairs.add(pair);
    client.on('error', () => {});
    client.on('close', () => {
      pair.upstream?.destroy();
      pairs.delete(pair);
    });
    if (swallowing) return; // accepted, never answered
    const upstream = connect(target);
    pair.upstream = upstream;
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (data: Buffer) => {
      if (!swallowing) upstream.write(data);
    });
    upstream.on('data', (data: Buffer) => {
      if (!swallowing) client.write(data);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('blackhole: no port');
  return {
    port: address.port,
    forward() {
      swallowing = false;
    },
    swallow() {
      swallowing = true;
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export interface RawAnswer {
  /** The status code, or 0 when the connection closed without an answer. */
  status: number;
  /** ms from connecting to the first byte of the answer. */
  ms: number;
  /** The answer's head and the start of its body, as text. */
  head: string;
}

/**
 * Sends prepared HTTP/1.1 requests at once over raw sockets (one connection each) and times
 * each answer (status 0: the connection closed, or stayed silent for giveUpAfterMs). Unlike `fetch`, the client costs next to nothing per request, so on a small
 * machine the times measure the server, not the client.
 */
export async function rawPosts(
  target: { host: string; port: number; path: string },
  requests: { body: string | Buffer; headers: Record<string, string> }[],
  options: { giveUpAfterMs?: number } = {},
): Promise<RawAnswer[]> {
  const giveUp = options.giveUpAfterMs ?? 120_000;
  const wire = requests.map((request) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.from(request.body);
    const head = [
      `POST ${target.path} HTTP/1.1`,
      `Host: ${target.host}:${target.port}`,
      `Content-Length: ${body.length}`,
      'Connection: close',
      ...Object.entries(request.headers)
        .filter(([k]) => k.toLowerCase() !== 'content-length')
        .map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ].join('\r\n');
    return Buffer.concat([Buffer.from(head), body]);
  });
  return Promise.all(
    wire.map(
      (bytes) =>
        new Promise<RawAnswer>((resolve) => {
          const started = Date.now();
          let answer: Buffer = Buffer.alloc(0);
          let firstByteMs: number | null = null;
          const socket = connect({ host: target.host, port: target.port }, () => socket.write(bytes));
          // No answer at all within giveUpAfterMs: recorded as status 0 (the old ingest, with
          // Postgres silent, held deliveries for good).
          socket.setTimeout(giveUp, () => socket.destroy());
          socket.on('data', (data: Buffer) => {
            firstByteMs ??= Date.now() - started;
            if (answer.length < 4096) answer = Buffer.concat([answer, data]);
          });
          socket.on('error', () => {});
          socket.on('close', () => {
            const head = answer.toString('latin1');
            resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), ms: firstByteMs ?? Date.now() - started, head });
          });
        }),
    ),
  );
}

/** Probes GET /healthz on each port, every 100 ms, one JSON line per answer, until killed. */
const PROBER = `
const ports = process.argv.slice(1).map(Number);
const probe = async (port) => {
  for (;;) {
    const started = Date.now();
    let status = 0, lag = null;
    try {
      const response = await fetch('http://127.0.0.1:' + port + '/healthz', { signal: AbortSignal.timeout(10000) });
      status = response.status;
      lag = (await response.json()).mainThreadLastRanMsAgo ?? null;
    } catch {}
    process.stdout.write(JSON.stringify({ port, status, ms: Date.now() - started, lag }) + '\\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};
for (const port of ports) probe(port);
`;

export interface HealthProbe {
  port: number;
  /** 0: no answer (refused, or no answer within 10 s). */
  status: number;
  ms: number;
  /** What a liveness port said of the main thread (mainThreadLastRanMsAgo), else null. */
  lag: number | null;
}

/**
 * Probes `GET /healthz` on each port every 100 ms from a PROCESS of its own, so that a busy
 * load generator in this process does not delay the probes it measures. `stop()` returns every
 * answer.
 */
export async function startHealthProber(ports: number[]): Promise<{ stop(): Promise<HealthProbe[]> }> {
  const child = spawn(process.execPath, ['-e', PROBER, ...ports.map(String)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitFor(() => output.includes('\n'), { what: 'the health prober running' });
  return {
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('close', resolve));
      return output
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as HealthProbe);
    },
  };
}
