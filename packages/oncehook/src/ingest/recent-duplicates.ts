/**
 * The last duplicate deliveries this ingest process answered, for the admin events view.
 * Kept in memory (a small ring): recording duplicates in Postgres would add a write, and a row
 * lock that can wait behind a worker's step, to the hottest path for no correctness gain.
 * With several ingest replicas each shows what it saw.
 */
export interface RecentDuplicate {
  at: Date;
  source: string;
  eventId: string;
  rowId: number | null;
  state: string | null;
}

export class RecentDuplicates {
  readonly #items: RecentDuplicate[] = [];
  constructor(private readonly capacity = 200) {}

  add(item: RecentDuplicate): void {
    this.#items.push(item);
    if (this.#items.length > this.capacity) this.#items.shift();
  }

  /** Newest first. */
  list(limit = 50): RecentDuplicate[] {
    return this.#items.slice(-limit).reverse();
  }
}
