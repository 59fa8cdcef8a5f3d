// `llmgw agent`: probe this machine (or a declared one with --simulate), join
// the control plane, report, and run what it is assigned. SIGINT/SIGTERM stop
// the agent; engines it started keep running and are found again next start.
import { resolve } from 'node:path';
import pino from 'pino';
import { Agent, compileAgentOptions } from '../agent/index.js';
import { NodeProber } from '../agent/probe/index.js';
import { LlmgwError } from '../errors/index.js';

export interface AgentFlags {
  control: string;
  joinToken?: string;
  nodeId?: string;
  labels?: string;
  stateDir: string;
  cacheDir?: string;
  modelDir: string[];
  mgmtAddr?: string;
  simulate?: string;
  fabric: string[];
  heartbeatInterval?: string;
  logLevel: string;
}

export function parseLabels(text: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  if (!text) return labels;
  for (const pair of text.split(',')) {
    const trimmed = pair.trim();
    if (!trimmed) continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0) throw new LlmgwError('LLMGW_CONFIG_INVALID', `--labels: "${trimmed}" is not key=value; write --labels pool=a100,zone=eu`);
    labels[trimmed.slice(0, eq)] = trimmed.slice(eq + 1);
  }
  return labels;
}

export async function runAgent(flags: AgentFlags): Promise<void> {
  const stateDir = resolve(flags.stateDir);
  const config = compileAgentOptions({
    control: flags.control.split(',').map((u) => u.trim()).filter(Boolean),
    ...(flags.joinToken ?? process.env.LLMGW_JOIN_TOKEN ? { joinToken: flags.joinToken ?? process.env.LLMGW_JOIN_TOKEN } : {}),
    ...(flags.nodeId ? { nodeId: flags.nodeId } : {}),
    labels: parseLabels(flags.labels),
    stateDir,
    ...(flags.mgmtAddr ? { mgmtAddr: flags.mgmtAddr } : {}),
    ...(flags.heartbeatInterval ? { heartbeatInterval: flags.heartbeatInterval } : {}),
  });
  const logger = pino({ level: flags.logLevel, base: { part: 'agent', node: config.nodeId } });
  const prober = new NodeProber({
    cacheDir: resolve(flags.cacheDir ?? `${stateDir}/cache`),
    modelDirs: flags.modelDir.map((d) => resolve(d)),
    fabrics: flags.fabric,
    ...(flags.simulate ? { simulate: flags.simulate, simulateSeed: config.nodeId } : {}),
  });
  const agent = new Agent(config, { probe: () => prober.probe(), logger });
  await agent.start();
  logger.child({}, { level: 'info' }).info({ mgmt: agent.mgmtUrl, control: config.controlUrls }, 'llmgw agent running');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    void agent.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
