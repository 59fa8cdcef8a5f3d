// Stands in for `llmgw ctl` until src/cli/main.ts wires it: runs the built
// runCtl with the arguments given and exits with its code, exactly as the
// subcommand will. The tests name this file in one place (ctl-support.ts).
const { runCtl } = await import(new URL('../../dist/ctl/index.js', import.meta.url).href);
process.exitCode = await runCtl(process.argv.slice(2));
