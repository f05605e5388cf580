import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

export type LogFormat = 'json' | 'pretty';

/**
 * Structured logs (pino). Every log line about an event carries `provider`, `eventId`, and,
 * once claimed, `rowId` and `attempt`, so one receipt sent twice can be traced to two
 * deliveries or to one delivery processed twice.
 *
 * `json` (the default; what production and log pipelines read): one JSON object per line, with
 * ISO 8601 times. `pretty` (LOG_FORMAT=pretty; `npm start` and the demo use it): one readable
 * colored line per entry, its fields indented below, written synchronously to stdout.
 */
export function createLogger(name: string, level: string = 'info', format: LogFormat = 'json'): Logger {
  const options = { name, level, base: { service: name, pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime };
  if (format === 'json') return pino(options);
  return pino(options, pretty({ sync: true, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: true }));
}
