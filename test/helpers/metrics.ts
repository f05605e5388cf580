import { createIngestMetrics, type IngestMetrics } from '@oncehook/shared';

/** A metrics registry of the test's own, and a reader for one series' current value. */
export function createMetricsProbe(): { metrics: IngestMetrics; value(name: string, labels: Record<string, string>): Promise<number> } {
  const metrics = createIngestMetrics({ defaultMetrics: false });
  return {
    metrics,
    async value(name, labels) {
      const metric = metrics.registry.getSingleMetric(name);
      if (!metric) throw new Error(`no metric ${name}`);
      const { values } = await metric.get();
      const match = values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
      return match?.value ?? 0;
    },
  };
}
