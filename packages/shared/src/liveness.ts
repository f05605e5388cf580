/**
 * Liveness that a busy process still answers: a tiny HTTP server on a port of its own, in a
 * worker thread, answering from a heartbeat the main thread writes.
 *
 * Why: under a flood of deliveries (about 2,300/s on 2 cores) ingest's event loop is busy for
 * seconds at a time, and `/healthz` on the main port waits its turn: up to 2,071 ms was seen,
 * so a liveness probe with a 1-2 s timeout restarted a healthy, merely busy ingest, which then
 * dropped everything in flight. A liveness probe must tell "busy" from "wedged":
 *
 *   main thread    every HEARTBEAT_MS (an unref'd timer) writes Date.now() into shared memory
 *   worker thread  GET /healthz (and /livez) on HEALTH_PORT: 200 while the heartbeat is younger
 *                  than `stallMs`, 503 when the main thread has not run a timer for that long
 *                  (an infinite loop, a blocked thread); the answer carries the heartbeat's age
 *
 * The worker thread has its own event loop, so it answers within milliseconds however busy
 * the main one is; it reports the main loop's health, not its own. Readiness (`/readyz`:
 * Postgres and the queue answer) stays on the main port, where it should be slow when the
 * process is.
 */
import { Worker } from 'node:worker_threads';

/** How often the main thread proves it runs. */
const HEARTBEAT_MS = 100;

export interface LivenessServer {
  port: number;
  close(): Promise<void>;
}

// The worker thread's code: plain JavaScript (it runs from a string: no build step, no file).
// mutant: liveness-ignores-heartbeat
const WORKER_SOURCE = `
const { createServer } = require('node:http');
const { parentPort, workerData } = require('node:worker_threads');
const beat = new Float64Array(workerData.heartbeat);
const server = createServer((req, res) => {
  const path = (req.url || '').split('?')[0];
  if (req.method !== 'GET' || (path !== '/healthz' && path !== '/livez')) {
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found","message":"liveness serves GET /healthz"}');
    return;
  }
  const age = Math.max(0, Date.now() - beat[0]);
  const live = age < workerData.stallMs;
  res.writeHead(live ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store', connection: 'close' });
  res.end(JSON.stringify({ status: live ? 'ok' : 'stalled', mainThreadLastRanMsAgo: Math.round(age), stallMs: workerData.stallMs }));
});
server.on('error', (error) => parentPort.postMessage({ error: String(error && error.message || error) }));
server.listen(workerData.port, workerData.host, () => parentPort.postMessage({ port: server.address().port }));
parentPort.on('message', (message) => { if (message === 'close') server.close(() => process.exit(0)); });
`;

/**
 * Starts the liveness server on `host:port` (0: any free port; `port` says which). `stallMs`:
 * how long the main thread may go without running a timer before liveness answers 503.
 */
export async function startLiveness(options: { port: number; host: string; stallMs: number }): Promise<LivenessServer> {
  const heartbeat = new SharedArrayBuffer(8);
  const beat = new Float64Array(heartbeat);
  beat[0] = Date.now();
  const timer = setInterval(() => {
    beat[0] = Date.now();
  }, HEARTBEAT_MS);
  timer.unref();
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { heartbeat, port: options.port, host: options.host, stallMs: options.stallMs } });
  worker.unref();
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', (message: { port?: number; error?: string }) =>
      message.port !== undefined ? resolve(message.port) : reject(new Error(`liveness server could not listen on ${options.host}:${options.port}: ${message.error}`)),
    );
    worker.once('error', reject);
  });
  return {
    port,
    async close() {
      clearInterval(timer);
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('close');
      await Promise.race([exited, new Promise<void>((resolve) => setTimeout(resolve, 1_000))]);
      await worker.terminate();
    },
  };
}
