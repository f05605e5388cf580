/**
 * `@oncehook/sdk/internal`: what the engine and the processes (@oncehook/core, oncehook) use
 * from the SDK and handler code does not: the tracer, the backoff formula, the JSON recording
 * of step results. Not part of the handler API: it may change in any release.
 */
export { backoffDelayMs, type BackoffOptions } from './backoff.js';
export { findNonJson, toRecordedJson } from './json.js';
export { TRACER_NAME, tracer } from './tracer.js';
