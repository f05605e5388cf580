import { createIngestMetrics, type IngestMetrics } from '@oncehook/shared';

/**
 * A metrics registry of the test's own, and a reader of a counter: the sum of every series with
 * these labels, whatever its other labels (the `type` label of one delivery can change mid-test:
 * `other` until ingest's next read of the handled types, then the type).
 */
export function createMetricsProbe(): { metrics: IngestMetrics; value(name: string, labels: Record<string, string>): Promise<number> } {
  const metrics = createIngestMetrics({ defaultMetrics: false });
  return {
    metrics,
    async value(name, labels) {
      const metric = metrics.registry.getSingleMetric(name);
      if (!metric) throw new Error(`no metric ${name}`);
      const { values } = await metric.get();
      return values.filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val)).reduce((sum, v) => sum + v.value, 0);
    },
  };
}
