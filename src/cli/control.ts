// `llmgw control`: load the configuration from file, environment and flags,
// start the control plane, and stop it cleanly on SIGINT or SIGTERM.
import { ControlPlane, CONTROL_OPTION_KEYS, loadControlConfig } from '../control/index.js';
import { applyHeapGrowing } from './heap.js';

export async function runControl(opts: Record<string, string | undefined>): Promise<void> {
  const flags: Record<string, string> = {};
  for (const key of CONTROL_OPTION_KEYS) {
    const camel = key.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
    const value = opts[camel];
    if (value !== undefined) flags[key] = value;
  }
  const config = loadControlConfig({ ...(opts.config ? { file: opts.config } : {}), env: process.env, flags });
  applyHeapGrowing(config.heapGrowingPercent);
  const plane = await ControlPlane.create(config, { allowHttpSources: opts.allowHttpSources !== undefined });
  const urls = await plane.listen();
  // The listening line is printed whatever the log level: scripts and tests wait for it.
  plane.logger.child({}, { level: 'info' }).info({ client: urls.client, admin: urls.admin, agent: urls.agent, store: config.store.kind }, 'llmgw control listening');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    plane.logger.info({ signal }, 'stopping');
    void plane.close().then(() => process.exit(0));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
