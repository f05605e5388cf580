/**
 * `npm run model -- [--bound small|medium|deep] [--mutants] [--mutant NAME] [--memory-mb N]`
 *
 * Checks the model of the run protocol (model/protocol.pml) with the Spin model checker: every
 * interleaving of two deliveries, two workers, the reconciler, a lease clock, a worker's kill
 * -9, a lost queue, a handler error and an operator's redrive, within the bound, against the
 * invariants in the model's header (no local step applied twice, no external step called with
 * two keys or again after its record, no acknowledged event lost, no run done with a step
 * missing). `--bound small` (the default) is what `npm test` checks (seconds); `medium` lets
 * leases expire twice under live workers (about 40 s, 1 GB); `deep` also allows two crashes and
 * two handler errors (about 11 minutes, 11 GB). `--mutants` also checks each mutant of the
 * model and prints the counterexample it yields; `--mutant NAME` one of them. Exits 1 when the
 * model breaks an invariant, a search did not finish, or a mutant yields no counterexample.
 * Needs Spin and gcc (`apt-get install spin gcc`).
 */
import { checkModel, MODEL_BOUNDS, MODEL_MUTANTS, type ModelBound, type ModelMutant, missingModelTools, parseScriptArgs } from '@oncehook/harness';

const { values } = parseScriptArgs(import.meta.url, {
  options: {
    bound: { type: 'string', default: 'small' },
    mutants: { type: 'boolean', default: false },
    mutant: { type: 'string' },
    'memory-mb': { type: 'string' },
  },
});

function usage(message: string): never {
  process.stderr.write(`${message}\n(--help for more)\n`);
  process.exit(2);
}

if (!(values.bound! in MODEL_BOUNDS)) usage(`--bound must be one of ${Object.keys(MODEL_BOUNDS).join(', ')} (got "${values.bound}")`);
if (values.mutant !== undefined && !(values.mutant in MODEL_MUTANTS)) usage(`--mutant must be one of ${Object.keys(MODEL_MUTANTS).join(', ')} (got "${values.mutant}")`);
const memoryMb = values['memory-mb'] === undefined ? (values.bound === 'deep' ? 16_000 : values.bound === 'medium' ? 4_000 : 2048) : Number(values['memory-mb']);
if (!Number.isInteger(memoryMb) || memoryMb < 64) usage(`--memory-mb must be a whole number of megabytes >= 64 (got "${values['memory-mb']}")`);

const missing = await missingModelTools();
if (missing) {
  process.stderr.write(`${missing}\n`);
  process.exit(1);
}

const bound = values.bound as ModelBound;
let failed = false;
const budgets = Object.entries(MODEL_BOUNDS[bound])
  .map(([name, value]) => `${name}=${value}`)
  .join(' ');
console.log(`model/protocol.pml, bound ${bound} (${budgets})`);

const model = await checkModel({ bound, memoryMb });
if (model.errors > 0) {
  failed = true;
  console.log(`  the model breaks an invariant: ${model.violated}`);
  for (const line of model.trail) console.log(`    ${line}`);
} else if (!model.complete) {
  failed = true;
  console.log(`  the search did not finish (memory bound ${memoryMb} MB reached, or depth): raise --memory-mb`);
} else {
  console.log(`  every invariant holds: ${model.statesStored} states, ${model.transitions} transitions, depth ${model.depth}, ${model.seconds.toFixed(1)} s`);
}

const mutants = values.mutant !== undefined ? [values.mutant as ModelMutant] : values.mutants ? (Object.keys(MODEL_MUTANTS) as ModelMutant[]) : [];
for (const mutant of mutants) {
  const result = await checkModel({ bound, mutant, memoryMb });
  if (result.errors === 0) {
    failed = true;
    console.log(`\nmutant ${mutant} (${MODEL_MUTANTS[mutant].what}): NO counterexample (${result.statesStored} states): the invariants miss it`);
    continue;
  }
  console.log(`\nmutant ${mutant} (${MODEL_MUTANTS[mutant].what}): counterexample in ${result.seconds.toFixed(1)} s, ${result.trail.length} lines`);
  for (const line of result.trail) console.log(`    ${line}`);
}
process.exit(failed ? 1 : 0);
