/**
 * Process plumbing shared by the entry points: run main, turn a ConfigError into a readable
 * message and exit code 1, and wire SIGTERM/SIGINT to a graceful shutdown.
 */
import { ConfigError } from '@oncehook/sdk';
import { StartupError } from './errors.js';
import type { LogFormat, Logger } from './logger.js';

/**
 * A plain line on stdout for supervisors and scripts ("ingest listening on 3000", "worker
 * ready"), printed whatever LOG_LEVEL is, so readiness can be detected with logging turned down.
 */
export function announce(line: string): void {
  process.stdout.write(`oncehook: ${line}\n`);
}

/**
 * Something a person and a log pipeline both want to know (ready, listening, migrated): with
 * JSON logs, a log line for the pipeline and the plain line above; with LOG_FORMAT=pretty (a
 * person at a terminal: `oncehook dev`, `npm start`), the plain line alone, not the same news
 * twice.
 */
export function announceLogged(log: Logger, format: LogFormat, fields: Record<string, unknown>, message: string, line = message): void {
  if (format === 'json') log.info(fields, message);
  announce(line);
}

export function runMain(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    if (error instanceof ConfigError || error instanceof StartupError) {
      process.stderr.write(`${error.message}\n`);
    } else {
      process.stderr.write(`fatal: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    }
    process.exit(1);
  });
}

/**
 * Calls shutdown once on the first SIGTERM/SIGINT; later signals are ignored (Ctrl-C in a
 * terminal reaches every process of the group, and a supervisor may send TERM as well). The
 * process exits 0 when shutdown resolves, 1 when it throws or exceeds timeoutMs.
 */
export function onShutdownSignal(shutdown: (signal: string) => Promise<void>, timeoutMs: number): void {
  let stopping = false;
  const handle = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    const timer = setTimeout(() => {
      process.stderr.write(`shutdown did not finish within ${timeoutMs}ms; exiting\n`);
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    shutdown(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handle);
  process.on('SIGINT', handle);
}
