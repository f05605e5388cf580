/**
 * A worker process, start to stop: parse the configuration, load the handler modules
 * (ONCEHOOK_HANDLERS, or `--handlers`), build the worker and start it; on SIGTERM stop taking
 * jobs, let the ones in flight finish (their leases cover the rest if the timeout hits), then
 * close connections. `oncehook worker` and apps/worker run this.
 */
import { awaitDatabase, checkRedisMode, destinationAddressProblem, handlerModuleList, loadHandlerModules } from '@oncehook/core';
import { announce, announceLogged, createLogger, onShutdownSignal, outboundUrlProblem, StartupError, startTracing, type Env } from '@oncehook/shared';
import { loadWorkerConfig } from '../config.js';
import { buildWorker } from './build-worker.js';

export async function runWorker(env: Env = process.env): Promise<void> {
  const config = loadWorkerConfig(env);
  // REDIS_URL naming one node of a Redis Cluster is refused now, not found later as MOVED.
  await checkRedisMode(config);
  // OpenTelemetry, when the OTEL_* variables ask for it (tracing.ts); before anything makes a span.
  const tracing = await startTracing('oncehook-worker', env);
  const log = createLogger('worker', config.LOG_LEVEL, config.LOG_FORMAT);
  // Its database exists, takes its credentials and has Oncehook's tables up to date (else one
  // line and exit 1); one that cannot be reached yet is waited for: nothing says ready before.
  await awaitDatabase(config.DATABASE_URL, { schema: config.ONCEHOOK_SCHEMA, log });
  const { handlers, modules } = await loadHandlerModules(handlerModuleList(config.ONCEHOOK_HANDLERS));
  if (config.LOG_FORMAT === 'json') {
    for (const handler of handlers) {
      log.info({ source: handler.source, type: handler.type, handler: handler.name, ...(handler.description ? { description: handler.description } : {}) }, 'handler loaded');
    }
  }
  const { destinations } = config;
  if (handlers.length === 0 && destinations.length === 0)
    log.warn({ unhandled: config.UNHANDLED_EVENTS }, 'no handler loaded (ONCEHOOK_HANDLERS is empty): every event will be unhandled');
  announce(`worker loaded ${handlers.length} handler(s) from ${modules.length ? modules.join(', ') : 'no module'}`);
  // One plain line per handler: what it takes (oncehook dev suggests a type from these).
  for (const handler of handlers) announce(`handler ${handler.name} takes ${handler.source} ${handler.type}`);

  // Destinations (docs/destinations.md): checked now, each mistake naming its field; a URL that
  // resolves to a link-local or metadata address is refused unless allowed (every call is
  // checked again where it connects).
  for (const destination of destinations) {
    const problem = await destinationAddressProblem(destination).catch((error: unknown) => {
      log.warn({ destination: destination.name, err: error }, 'could not resolve the destination host now; it is checked again before every call');
      return null;
    });
    if (problem) throw new StartupError(problem);
    announce(`destination ${destination.name} takes ${destination.sources.join(',')} ${destination.types.join(',')} to ${destination.url.origin}${destination.url.pathname}`);
  }

  if (config.FAILURE_NOTIFY_URL) {
    const problem = await outboundUrlProblem(new URL(config.FAILURE_NOTIFY_URL));
    if (problem) throw new StartupError(`FAILURE_NOTIFY_URL: ${problem}`);
  }

  const worker = buildWorker(config, handlers, { log });
  const { metricsPort } = await worker.start();
  announce(`worker metrics on ${metricsPort}`);
  // Tests and scripts wait for this line.
  announceLogged(log, config.LOG_FORMAT, { concurrency: config.WORKER_CONCURRENCY }, 'worker ready', `worker ready (pid ${process.pid})`);

  onShutdownSignal(async (signal) => {
    log.info({ signal }, 'shutting down: no new jobs, finishing in-flight ones');
    await worker.close();
    await tracing?.shutdown();
    log.info('worker stopped');
  }, config.SHUTDOWN_TIMEOUT_MS);
}
