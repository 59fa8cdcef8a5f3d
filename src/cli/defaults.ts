// The defaults of the commands that belong to the CLI alone (`llmgw up`,
// `tls init`, `install-service`), in one table. The control plane's and the
// agent's own defaults live with them (CONTROL_DEFAULTS, AGENT_DEFAULTS);
// commander declares no default anywhere, so --help prints these by reading
// them, and each command fills what is absent from them.

export const CLI_DEFAULTS = Object.freeze({
  up: Object.freeze({
    /** Where `llmgw up` keeps its store, secrets, models and logs; relative to the working directory, where `llmgw ctl` looks too. */
    dataDir: './.llmgw',
    /** up's own pace, quicker than a fleet's: one machine and a newcomer watching the demo model come up. Not flags. */
    reconcileInterval: '1s',
    heartbeatInterval: '2s',
  }),
  tlsInit: Object.freeze({
    /** How long the control plane and node certificates are valid, in days (the CA lives ten years). */
    days: 365,
  }),
  installService: Object.freeze({
    /** Where the unit file goes. */
    unitDir: '/etc/systemd/system',
    /** Where the environment file with the tokens goes (written 0600, never overwritten). */
    envDir: '/etc/llmgw',
    /** The system user the service runs as. */
    user: 'llmgw',
    /** Its state directory under /var/lib, made by systemd for the user. */
    stateName: 'llmgw',
  }),
});
