/**
 * The client of the sandbox's work API (POST /work/tasks, app.ts), for handlers that call it in
 * an external step (the chaos run's, the flow-control tests'): one call of `task` about `key`,
 * held `ms` by the API, under the step's idempotency key (the API applies each key once).
 */
export async function callWork(baseUrl: string, call: { task: string; key: string; ms: number; idempotencyKey: string; signal: AbortSignal }): Promise<{ id: string }> {
  const response = await fetch(`${baseUrl}/work/tasks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': call.idempotencyKey },
    body: JSON.stringify({ task: call.task, key: call.key, ms: call.ms }),
    signal: call.signal,
  });
  if (!response.ok) throw new Error(`work API answered ${response.status}`);
  return (await response.json()) as { id: string };
}
