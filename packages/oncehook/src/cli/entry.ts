/** The `oncehook` process (bin/oncehook.js loads the compiled copy of this file). */
import { main } from './main.js';

await main();
