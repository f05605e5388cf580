/**
 * The ingest process of this repository (`npm run start:ingest`, the compose file's ingest):
 * a shell over the oncehook package's runIngest, as `oncehook ingest` is.
 */
import { runMain } from '@oncehook/shared';
import { runIngest } from 'oncehook';

runMain(() => runIngest());
