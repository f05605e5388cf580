/** What withTimeout rejects with: the operation did not settle in time (it may still settle later). */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/** Rejects with a TimeoutError "<what> timed out after <ms>ms" if the promise has not settled by then. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} timed out after ${ms}ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
