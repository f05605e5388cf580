/**
 * Backfill: the piece of a provider's descriptor that lists, from the provider's OWN API, the
 * events it may have failed to deliver (docs/operating.md, "Recovering missed events"). Each
 * listed event becomes a VerifiedEvent exactly as a delivery of it would (the same id, type,
 * time and payload limits, `topLevelEvent` and friends), so the claim that follows is the
 * delivery's claim: an event already delivered is a duplicate, a missing one is new.
 *
 * Trust: an event read over TLS from the provider's API with the account's own key is
 * authentic without a webhook signature. A provider whose API is not authenticated has no
 * backfill. The official client of each provider makes the calls (its `peerDependency`,
 * loaded on first use), so the code the tests drive against the simulators is the code that
 * runs against the real API.
 */
import { OutboundRefusedError, outboundFetchFor } from '@oncehook/shared';
import { redactSecrets } from '@oncehook/shared';
import type { VerifiedEvent } from '@oncehook/shared';
import type { ProviderVariable } from './provider-variable.js';

/** What to list. */
export interface BackfillQuery {
  /** Events created at or after (the provider's own creation time). */
  since: Date;
  /** Events created before or at. */
  until: Date;
  /** Only these event types (null: every type). */
  types: readonly string[] | null;
  /**
   * Every event in the window, delivered or not (default false: only those the provider says
   * were not delivered, where it can say so).
   */
  all: boolean;
}

/** One listed event: the event to claim, or why it cannot be (the provider's id, the reason). */
export type BackfillItem = { event: VerifiedEvent } | { refused: { id: string; reason: string } };

/** What the caller is told while a listing runs. */
export interface BackfillHooks {
  /** A page came back (the API calls so far). */
  onPage?(calls: number): void;
  /** The provider answered 429: the listing waits this long, then asks again. */
  onRateLimited?(waitMs: number): void;
  /**
   * After each page: where a later listing of the same window goes on from (`cursor` of
   * BackfillContext), or null when this page was the last.
   */
  onCursor?(cursor: string | null): void;
}

/** Settings of one listing, from the environment and the command line. */
export interface BackfillContext {
  /** The environment (the provider's API variables are read from it). */
  env: Record<string, string | undefined>;
  /** The source the events are claimed under (its name is the dedupe namespace). */
  source: { name: string; kind: string };
  /** Stop after this many API calls (a scheduled pass's bound); null: no bound. */
  maxCalls: number | null;
  /** Go on from here (what onCursor said when an earlier listing stopped at maxCalls); null: from the newest. */
  cursor?: string | null;
  /** How long to wait at most after one 429 before asking again (ms). */
  maxRateLimitWaitMs: number;
  /** Caps of one listing (pages, bytes); DEFAULT_BACKFILL_LIMITS where not given. */
  limits?: Partial<BackfillLimits>;
  /** How to sleep (tests shorten it). */
  sleep?: (ms: number) => Promise<void>;
}

export interface BackfillApi {
  /**
   * The variables of the provider's API, as the README shows them; the FIRST is its key (what
   * `oncehook backfill --key-env VAR` replaces), then the rest (a hook, the base URL).
   */
  readonly env: readonly ProviderVariable[];
  /** How far back the provider's API keeps events (days), and what it says about it. */
  readonly history: { readonly days: number; readonly what: string };
  /** Whether the API can tell which events were not delivered (otherwise `--all` is implied). */
  readonly knowsUndelivered: boolean;
  /**
   * The events of the window, page by page, as the provider's API lists them. Throws
   * BackfillApiError when the API refuses (bad key, bad request, too many 429s in a row);
   * ConfigError when a variable is missing or wrong (before any call).
   */
  list(context: BackfillContext, query: BackfillQuery, hooks?: BackfillHooks): AsyncIterable<BackfillItem>;
}

/** The provider's API refused or failed; `calls` made so far. */
export class BackfillApiError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
    this.name = 'BackfillApiError';
  }
}

/** How long a 429 asks us to wait: its Retry-After (seconds or an HTTP date), else 1 s; at most `maxMs`. */
export function retryAfterMs(value: string | null | undefined, maxMs: number, now = Date.now()): number {
  let ms = 1_000;
  if (value) {
    const seconds = Number(value);
    if (Number.isFinite(seconds) && seconds >= 0) ms = seconds * 1_000;
    else {
      const at = Date.parse(value);
      if (!Number.isNaN(at)) ms = Math.max(0, at - now);
    }
  }
  return Math.min(ms, maxMs);
}

/** How many 429s in a row a listing waits out before it gives up (with what it did so far). */
export const MAX_RATE_LIMITED_IN_A_ROW = 5;

export const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * One API call of a listing, its rate limit waited out: `rateLimited(error)` says how long the
 * provider asks to wait (ms) when the error is a rate limit, null otherwise. Past
 * MAX_RATE_LIMITED_IN_A_ROW in a row, or on any other error, the error is thrown as it came (the
 * caller says what it means).
 */
export async function withRateLimits<T>(
  call: () => Promise<T>,
  rateLimited: (error: unknown) => number | null,
  context: Pick<BackfillContext, 'sleep'>,
  hooks: BackfillHooks,
): Promise<T> {
  for (let limited = 0; ; limited += 1) {
    try {
      return await call();
    } catch (error) {
      const waitMs = rateLimited(error);
      if (waitMs === null || limited >= MAX_RATE_LIMITED_IN_A_ROW) throw error;
      hooks.onRateLimited?.(waitMs);
      await (context.sleep ?? sleepMs)(waitMs);
    }
  }
}

/**
 * What one listing may take from a provider's API, whatever the API (or something posing as it)
 * answers: pages, bytes per answer, bytes in all. Past a cap the listing stops with a
 * BackfillApiError saying which cap and what to do; what was claimed until then stays claimed.
 */
export interface BackfillLimits {
  /** List pages (GitHub's delivery details are not pages). */
  maxPages: number;
  /** Bytes of one answer (a page of 100 Stripe events is usually under 2 MB). */
  maxResponseBytes: number;
  /** Bytes of every answer of the listing together. */
  maxBytes: number;
}

export const DEFAULT_BACKFILL_LIMITS: BackfillLimits = { maxPages: 1_000, maxResponseBytes: 32 * 1024 * 1024, maxBytes: 1024 * 1024 * 1024 };

/**
 * The caps and the origin of one listing, and the `fetch` its API client calls through: every
 * call goes through the outbound guard, only to the API's own origin (a pagination link or a
 * redirect elsewhere is refused before the key is sent), each answer and all of them together
 * bounded. A cursor the API sends twice stops the listing (an API that answers "more" forever
 * would otherwise be read forever).
 */
export class ListingBudget {
  readonly limits: BackfillLimits;
  pages = 0;
  bytes = 0;
  /** Why the listing was stopped by the budget (a cap, another origin), once it was. */
  stopped: string | null = null;
  readonly #cursors = new Set<string>();

  constructor(
    /** "Stripe's API": the words of the messages. */
    readonly api: string,
    /** The API's origin (`https://api.stripe.com`): the only one called. */
    readonly origin: string,
    limits: Partial<BackfillLimits> = {},
  ) {
    this.limits = { ...DEFAULT_BACKFILL_LIMITS, ...limits };
  }

  /** A `fetch` for the API's client, under the guard, the origin and the byte caps. */
  fetch(): typeof globalThis.fetch {
    const guarded = outboundFetchFor({ allowedOrigins: [this.origin] });
    const budget = this;
    const counted = async (input: Parameters<typeof globalThis.fetch>[0], init?: RequestInit) => {
      if (budget.stopped) throw new BackfillApiError(budget.stopped, null);
      const url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
      let response: Response;
      try {
        response = await guarded(input, init);
      } catch (error) {
        if (error instanceof OutboundRefusedError && error.reason === 'origin')
          budget.stop(`${budget.api} sent us to ${new URL(url).origin}, not its own origin (${budget.origin}): not followed, the key stays with the API`);
        throw error;
      }
      const room = Math.min(budget.limits.maxResponseBytes, budget.limits.maxBytes - budget.bytes);
      const declared = Number(response.headers.get('content-length') ?? Number.NaN);
      if (Number.isFinite(declared) && declared > room) {
        await response.body?.cancel().catch(() => {});
        throw budget.stop(budget.bytesMessage(declared > budget.limits.maxResponseBytes));
      }
      if (!response.body) return response;
      let seen = 0;
      const body = response.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            seen += chunk.byteLength;
            budget.bytes += chunk.byteLength;
            // mutant: backfill-page-bytes-unbounded
            if (seen > room) controller.error(budget.stop(budget.bytesMessage(seen > budget.limits.maxResponseBytes)));
            else controller.enqueue(chunk);
          },
        }),
      );
      return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    };
    return counted as typeof globalThis.fetch;
  }

  /** Counts a page about to be asked for with `cursor`; throws when a cap is reached or the cursor came before. */
  page(cursor: string | null): void {
    if (this.stopped) throw new BackfillApiError(this.stopped, null);
    // mutant: backfill-pages-unbounded
    if (this.pages >= this.limits.maxPages)
      throw this.stop(`stopped after ${this.pages} pages (at most ${this.limits.maxPages} per listing): list a shorter window (--since/--until), or raise --max-pages`);
    if (cursor !== null) {
      // mutant: backfill-repeated-cursor
      if (this.#cursors.has(cursor)) throw this.stop(`${this.api} sent the same page cursor twice (${cursor.slice(0, 80)}): stopped, it would list the same page forever`);
      this.#cursors.add(cursor);
    }
    this.pages += 1;
  }

  /** A link the API gave for the next page: on its own origin, or the listing stops. */
  checkLink(link: string): URL {
    let url: URL;
    try {
      url = new URL(link, this.origin);
    } catch {
      throw this.stop(`${this.api} sent a next-page link that is not a URL: stopped`);
    }
    // mutant: backfill-follows-any-origin
    if (url.origin !== this.origin)
      throw this.stop(`${this.api} sent a next-page link to ${url.origin}, not its own origin (${this.origin}): not followed, the key stays with the API`);
    return url;
  }

  /** What to throw for an error of the API's client: the budget's reason when it stopped the listing. */
  explain(error: unknown): unknown {
    return this.stopped ? new BackfillApiError(this.stopped, null) : error;
  }

  stop(message: string): BackfillApiError {
    this.stopped ??= message;
    return new BackfillApiError(this.stopped, null);
  }

  bytesMessage(oneAnswer: boolean): string {
    return oneAnswer
      ? `${this.api} answered more than ${this.limits.maxResponseBytes} bytes in one page: stopped (a page of events is a few MB at most)`
      : `${this.api} answered more than ${this.limits.maxBytes} bytes in this listing: stopped; list a shorter window`;
  }
}

/**
 * A provider's backfill whose errors never carry its key: an API (or a stand-in posing as it)
 * may echo what it was sent in its error's message, which the CLI prints and a scheduled pass
 * stores. The key is the API's first variable (`env[0]`); every variable whose name says KEY or
 * TOKEN is scrubbed too.
 */
export function keyRedacted(api: BackfillApi): BackfillApi {
  return {
    ...api,
    async *list(context, query, hooks) {
      const secrets = api.env
        .filter((v, i) => i === 0 || /KEY|TOKEN|SECRET/.test(v.name))
        .flatMap((v) => {
          const value = context.env[v.name];
          return value ? [value] : [];
        });
      try {
        yield* api.list(context, query, hooks);
      } catch (error) {
        // mutant: backfill-error-keeps-key
        if (error instanceof Error) error.message = redactSecrets(error.message, secrets);
        throw error;
      }
    },
  };
}
