/**
 * The admin scenarios' attackers (beside-admin.ts), in a process of their own (so the deliveries the
 * scenario times are not slowed by its own event loop): `clients` loops, each repeating a slow
 * payload search (every fifth a bulk re-drive preview) with one of `tokens`, as fast as the
 * answers come (100 ms after an answer other than 200). On SIGTERM it prints the answers'
 * statuses as one JSON line and exits. With `queue-page` (the queue-page scenario), each loop
 * loads the Postgres queue's jobs page (/admin/queues) instead.
 *
 *   node ... scripts/attack/admin-clients.ts <url> <clients> <token,token,...> [search|queue-page]
 */
const [url, clientsText, tokensText, mode = 'search'] = process.argv.slice(2);
if (!url || !clientsText || !tokensText || (mode !== 'search' && mode !== 'queue-page')) {
  process.stderr.write('usage: admin-clients.ts <url> <clients> <token,token,...> [search|queue-page]\n');
  process.exit(2);
}
const tokens = tokensText.split(',');
const statuses: Record<number, number> = {};
let running = true;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function client(i: number): Promise<void> {
  const token = tokens[i % tokens.length]!;
  while (running) {
    const preview = i % 5 === 4;
    const started = performance.now();
    const response = await (mode === 'queue-page'
      ? fetch(`${url}/admin/queues`, { headers: { authorization: `Bearer ${token}` } })
      : fetch(
          preview ? `${url}/admin/api/redrive` : `${url}/admin/api/events?since=30d&payload=${encodeURIComponent(`~no needle ${i}`)}`,
          preview
            ? {
                method: 'POST',
                headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
                body: JSON.stringify({ dry_run: true, state: 'done', since: '30d', payload: `~no needle ${i}` }),
              }
            : { headers: { authorization: `Bearer ${token}` } },
        )
    ).catch(() => null);
    await response?.arrayBuffer().catch(() => undefined);
    const status = response?.status ?? 0;
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status !== 200 && performance.now() - started < 100) await sleep(100);
  }
}

const all = Promise.all(Array.from({ length: Number(clientsText) }, (_, i) => client(i)));
process.on('SIGTERM', () => {
  running = false;
  void all.then(() => {
    process.stdout.write(`${JSON.stringify(statuses)}\n`);
    process.exit(0);
  });
});
process.stdout.write('searching\n');
