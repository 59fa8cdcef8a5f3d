// The control plane: catalog, inventory, placement, reconciler and router
// behind three listeners (client, admin, agent). `llmgw control` runs one;
// `llmgw up` runs one beside an agent. See src/control/README.md for the words
// this part uses.
export { ControlPlane } from './control-plane.js';
export { GatewayProcess, serveMetrics, type GatewayProcessDeps } from './gateway-process.js';
export { compileControlOptions, CONTROL_OPTION_KEYS, loadControlConfig, type ControlOptions } from './config/index.js';
