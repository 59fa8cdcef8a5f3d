// The one `llmgw` executable and its subcommands. Each subcommand is a thin
// shell over its part (control, agent, ctl, up, engine): parse flags, build,
// run, and turn a typed error into a sentence and an exit code. Exit codes:
// 0 ok, 1 failed, 2 usage or configuration error.
import { isLlmgwError } from '../errors/index.js';
import { buildProgram } from './program.js';

// The subcommands and their flags are registered in program.ts (a test walks them there).
const program = buildProgram();

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (isLlmgwError(err)) {
    process.stderr.write(`llmgw: ${err.message}\n`);
    process.exit(
      err.code === 'LLMGW_CONFIG_INVALID' ||
        err.code === 'LLMGW_CATALOG_INVALID' ||
        err.code === 'LLMGW_CATALOG_CONFLICT'
        ? 2
        : 1,
    );
  }
  throw err;
}
