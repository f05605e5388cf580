import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs (pino). Every log line about an event carries `provider`, `eventId`,
 * and, once claimed, `rowId` and `attempt`, so one receipt sent twice can be traced to two
 * deliveries or to one delivery processed twice.
 */
export function createLogger(name: string, level: string = 'info'): Logger {
  return pino({ name, level, base: { service: name, pid: process.pid } });
}
