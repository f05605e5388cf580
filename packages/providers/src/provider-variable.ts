/**
 * One environment variable of a provider (its secrets and options, read by ingest; its API's,
 * read by `oncehook backfill`), as the README's table shows it.
 */
import type { z } from 'zod';

export interface ProviderVariable {
  readonly name: string;
  /** Parses and checks the value (zod: its message names what is wrong). */
  readonly schema: z.ZodType;
  /** The default as the README shows it (`unset`, `300`). */
  readonly shown: string;
  readonly meaning: string;
}
