/**
 * The worker's own small HTTP server: GET /metrics (Prometheus), GET /healthz (liveness: the
 * process answers) and GET /readyz (readiness: Postgres answers and the queue's store can take
 * a job on every shard; 503 with the reason otherwise). Each worker process has one, on
 * METRICS_HOST:METRICS_PORT (loopback by default). With METRICS_TOKEN set, /metrics needs
 * `Authorization: Bearer <token>` (docs/operating.md, protecting /metrics).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { listenFailure } from '@oncehook/shared';
import { metricsAuthorized } from '@oncehook/providers';
import type { Readiness } from '@oncehook/core';
import type { Registry } from 'prom-client';

export async function startMetricsServer(
  registry: Registry,
  port: number,
  host = '127.0.0.1',
  token?: string,
  readiness?: () => Promise<Readiness>,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics' && !metricsAuthorized(token, req.headers.authorization)) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      res.end('{"error":"unauthorized","message":"/metrics needs Authorization: Bearer <METRICS_TOKEN>"}');
    } else if (req.method === 'GET' && req.url === '/metrics') {
      registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(body);
        },
        (error: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(String(error));
        },
      );
    } else if (req.method === 'GET' && req.url === '/readyz' && readiness) {
      readiness().then(
        (verdict) => {
          res.writeHead(verdict.ready ? 200 : 503, { 'content-type': 'application/json' });
          res.end(JSON.stringify(verdict.body));
        },
        () => {
          res.writeHead(503, { 'content-type': 'application/json' });
          res.end('{"status":"not_ready"}');
        },
      );
    } else if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
    } else {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(`{"error":"not_found","message":"GET /metrics, /healthz${readiness ? ' or /readyz' : ''}"}`);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(listenFailure(error, port, 'METRICS_PORT')));
    server.listen(port, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
