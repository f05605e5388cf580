/**
 * One trace per event (OpenTelemetry). Off by default; on with the standard variables:
 * `OTEL_TRACES_EXPORTER=otlp` or an `OTEL_EXPORTER_OTLP_ENDPOINT` /
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the OTLP/HTTP exporter reads the rest of `OTEL_*`
 * itself), `OTEL_SERVICE_NAME` to rename the service.
 *
 * The spans of one event, in one trace:
 *   webhook.receive          ingest: one delivery (verify, claim), attributes provider, event id, outcome
 *   oncehook.run             worker: one attempt of one handler's run (handler, attempt, generation, outcome)
 *     oncehook.attempt       a zero-length marker at the attempt's start (survives a kill -9 of the worker)
 *     oncehook.step          each step run (not the ones skipped as recorded): name, kind, idempotency key
 *       outbound <api>       each outbound HTTP try of the SDK's client, with the idempotency key
 *
 * The trace context travels as a W3C `traceparent` string: in the dispatch job (from the
 * delivery that created the event), on the event row (written by the dispatch, so the
 * reconciler's recoveries after a crash resume in the same trace), and in every retry's job.
 * With tracing off, the API's no-op tracer costs a few allocations per span and nothing is
 * stored (no traceparent is produced).
 */
import { context, propagation, ROOT_CONTEXT, SpanStatusCode, type Context, type Span, type SpanOptions } from '@opentelemetry/api';
import { tracer } from '@oncehook/sdk/internal';

export { tracer };

/** The active context as a W3C traceparent, or undefined when nothing is traced. */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** The context a traceparent describes (the root context when absent). */
export function contextFrom(traceparent: string | undefined | null): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, { traceparent });
}

/**
 * Runs `fn` inside a new active span (a child of `parent`, or of the active context), ends it,
 * and records an exception thrown through it.
 */
export async function inSpan<T>(name: string, options: SpanOptions & { parent?: Context }, fn: (span: Span) => Promise<T>): Promise<T> {
  const parent = options.parent ?? context.active();
  return tracer().startActiveSpan(name, options, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** True when the standard variables ask for traces. */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter === 'none') return false;
  return exporter === 'otlp' || Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts the OpenTelemetry SDK with the OTLP/HTTP exporter when the environment asks for it
 * (tracingRequested); returns its shutdown (flushes what is buffered), or null when off.
 */
export async function startTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env): Promise<{ shutdown(): Promise<void> } | null> {
  if (!tracingRequested(env)) return null;
  const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  return { shutdown: () => provider.shutdown() };
}
