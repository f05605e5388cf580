/** The ingest's tuning, read from its configuration once (build-ingest.ts `ingestSettings`). */
import type { RetentionPolicy } from '@oncehook/providers';

export interface IngestSettings {
  /** Deliveries whose signed creation time is past their source's horizon are answered `expired`. */
  retention: RetentionPolicy;
  bodyLimitBytes: number;
  duplicateReenqueueAfterMs: number;
  retryAfterSeconds: number;
  enqueueTimeoutMs: number;
  /** Bytes of bodies held by deliveries in progress; past it 503 before reading (MAX_INFLIGHT_BODY_BYTES). */
  maxInflightBodyBytes: number;
  maxWaitingClaims: number;
  breakerOpenMs: number;
  claimTimeoutMs: number;
  logDeliveries: boolean;
}
