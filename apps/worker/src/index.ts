/** The worker as a library: what the test kit and the tests start (the same wiring as main.ts). */
export { buildWorker, workerSettings, type BuildWorkerOptions, type OncehookWorker } from './build-worker';
export { currentStep, createRunContext, type CurrentStep, type EngineHooks, type RunContext } from './handler-context';
export { handlerModuleList, loadHandlerModules, resolveModule } from './load-handlers';
export { processJob, runLeased, type JobOutcome, type ProcessDeps, type RunOutcome } from './process-event';
export { createReconciler, type ReconcileCounts, type Reconciler } from './reconciler';
export { startMetricsServer } from './metrics-server';
export { HandlerRegistry } from './registry';
export { createRetention } from './retention';
export { createEventWorker, type EventWorker, type WorkerSettings } from './worker';
