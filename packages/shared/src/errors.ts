/**
 * The few error types callers branch on. Each says what to do about it.
 */

/**
 * Our lease on an event was taken over (it expired and another worker claimed it) or
 * released by the reconciler. Stop working on the event immediately and commit nothing: the
 * new owner will finish it. Not a failure of the event.
 */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor(readonly rowId: number) {
    super(`lease on event row ${rowId} was lost (expired and taken over); stopping without committing`);
  }
}

/**
 * Throw from a handler (or let an outbound client throw it) when retrying cannot help: bad
 * data, a 4xx from a downstream API. The event goes straight to `failed` with this message,
 * where an operator can inspect and replay it.
 */
export class PermanentError extends Error {
  override name = 'PermanentError';
}
