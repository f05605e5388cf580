/**
 * The alert rules and the Grafana dashboard refer only to metrics Oncehook exports, parse, and
 * cover what the on-call needs (stuck, dead letters, duplicate ratio, ingest 5xx, queue age).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect, it } from 'vitest';
import { parse } from 'yaml';
import { createIngestMetrics, createWorkerMetrics } from '@oncehook/shared';
import { ROOT } from '@oncehook/harness';

async function exportedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const registry of [createIngestMetrics({ defaultMetrics: false }).registry, createWorkerMetrics({ defaultMetrics: false }).registry]) {
    for (const metric of await registry.getMetricsAsJSON()) {
      names.add(metric.name);
      if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
    }
  }
  return names;
}

const referenced = (expr: string) => [...expr.matchAll(/\b((?:webhook|oncehook)_[a-z_]+)\b/g)].map((m) => m[1]!);

it('every alert expression uses exported metrics, and the on-call essentials are covered', async () => {
  const names = await exportedNames();
  const file = parse(await readFile(path.join(ROOT, 'ops/prometheus/alerts.yml'), 'utf8')) as {
    groups: { rules: { alert: string; expr: string; annotations: { summary: string; description: string } }[] }[];
  };
  const rules = file.groups.flatMap((g) => g.rules);
  for (const rule of rules) {
    expect(referenced(rule.expr).length, rule.alert).toBeGreaterThan(0);
    for (const name of referenced(rule.expr)) expect(names.has(name), `${rule.alert} uses ${name}`).toBe(true);
    expect(rule.annotations.description.length).toBeGreaterThan(20);
  }
  expect(rules.map((r) => r.alert)).toEqual(
    expect.arrayContaining([
      'OncehookEventsStuck',
      'OncehookDeadLetters',
      'OncehookDuplicateRatioRising',
      'OncehookIngestErrors',
      'OncehookQueueBacklog',
      'OncehookPausedTooLong',
      'OncehookCircuitBreakerOpen',
      'OncehookDestinationFailing',
      'OncehookBackfillFoundMissedEvents',
    ]),
  );
});

it('every dashboard panel queries exported metrics', async () => {
  const names = await exportedNames();
  const dashboard = JSON.parse(await readFile(path.join(ROOT, 'ops/grafana/dashboards/oncehook.json'), 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
  expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
  for (const panel of dashboard.panels) {
    for (const target of panel.targets) for (const name of referenced(target.expr)) expect(names.has(name), `${panel.title} uses ${name}`).toBe(true);
  }
});
