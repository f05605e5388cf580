/**
 * The worker process of this repository (`npm run start:worker`): a shell over the oncehook
 * package's runWorker, as `oncehook worker` is.
 */
import { runMain } from '@oncehook/shared';
import { runWorker } from 'oncehook';

runMain(() => runWorker());
