/**
 * Loaded (`--import`) into every process this repository starts from its sources
 * (SOURCE_NODE_ARGS): when the process that started it dies without stopping it (a test run
 * killed mid-way with SIGKILL, a chaos or bench script interrupted), the process is orphaned
 * (its parent id changes) and stops itself, first with SIGTERM (its own clean stop), then for
 * good 10 s later. Without it, a killed suite left ingest, worker, receiver and bench servers
 * running on the shared machine, idle but holding memory, connections and ports, until reboot.
 *
 * Plain JavaScript and no imports, so that it loads before tsx and costs nothing: one unref'd
 * timer a second.
 */
const parent = process.ppid;
const watch = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(watch);
  setTimeout(() => process.exit(1), 10_000).unref();
  process.kill(process.pid, 'SIGTERM');
}, 1_000);
watch.unref();
