/**
 * The tracer every Oncehook span comes from (the SDK's outbound client, the engine's runs and
 * steps, ingest's deliveries): one name, so one instrumentation scope in a trace. A no-op until
 * an OpenTelemetry SDK is registered (the processes register one when OTEL_* asks; tracing.ts in
 * @oncehook/shared).
 */
import { trace } from '@opentelemetry/api';

export const TRACER_NAME = 'oncehook';

export function tracer() {
  return trace.getTracer(TRACER_NAME);
}
