/**
 * Keeps a log line that attackers can trigger at will (a rejected delivery) from flooding the
 * logs: at most `perWindow` lines per key (source + reason) per `windowMs`; the next line
 * allowed after a quiet spell says how many were suppressed meanwhile.
 *
 *   const limit = createLogLimiter({ windowMs: 10_000, perWindow: 5 });
 *   const { log, suppressed } = limit('stripe:bad_signature');
 *   if (log) logger.warn({ suppressed }, 'rejected delivery ...');
 */
export interface LogLimiterOptions {
  windowMs: number;
  perWindow: number;
  /** Most keys tracked at once (keys come from configured sources and fixed reasons; a safety bound). */
  maxKeys?: number;
  now?: () => number;
}

export function createLogLimiter(options: LogLimiterOptions): (key: string) => { log: boolean; suppressed: number } {
  const now = options.now ?? Date.now;
  const maxKeys = options.maxKeys ?? 1_000;
  const windows = new Map<string, { start: number; count: number; suppressed: number }>();
  return (key) => {
    const t = now();
    let w = windows.get(key);
    if (!w || t - w.start >= options.windowMs) {
      if (!w && windows.size >= maxKeys) windows.delete(windows.keys().next().value as string);
      const carried = w?.suppressed ?? 0;
      w = { start: t, count: 0, suppressed: carried };
      windows.set(key, w);
    }
    if (w.count < options.perWindow) {
      w.count += 1;
      const suppressed = w.suppressed;
      w.suppressed = 0;
      return { log: true, suppressed };
    }
    w.suppressed += 1;
    return { log: false, suppressed: w.suppressed };
  };
}
