// What the gateway knows of replicas that are not this fleet's engines (a
// hosted API, a colleague's vLLM, another llmgw) and of a model's spill-over
// policy: the vocabulary the catalog's `engine: remote` profiles and `spill`
// blocks are presented in. Apart from index.ts so the remote and spill-over
// parts (src/gateway/remote) name one small file; the control plane fills
// both in (src/control/remote).

/** What marks a RouterReplica as remote; the gateway guards such replicas with a circuit and waits out their 429s. */
export interface RemoteReplicaTraits {
  /** 'endpoint': an OpenAI-compatible API; 'peer': another llmgw, whose load is its whole fleet's. */
  readonly kind: 'endpoint' | 'peer';
  /** How long the remote may take to send its answer's headers, ms; 0 = the router's own headers timeout. */
  readonly timeoutMs: number;
  /**
   * The API its requests are sent in when not Chat Completions: OpenAI's
   * Responses or Anthropic's Messages, translated to and from chat by the
   * gateway (src/gateway/remote/foreign.ts). Absent = chat (a peer llmgw too).
   */
  readonly api?: ForeignApiName;
}

/** The APIs other than chat a remote may speak. */
export type ForeignApiName = 'responses' | 'anthropic';

/** When a model's requests go to its spill-over target instead of its own replicas. */
export type SpillWhen = 'saturated' | 'cold' | 'never';

/**
 * A model's spill-over: local replicas first, `to` (another routed model,
 * usually a remote endpoint or a peer) when `when` says so. `saturated`:
 * while no local replica is ready, or every one's predicted queue wait is
 * over `maxQueueMs`; `cold`: only while no local replica is ready (one is
 * started meanwhile); `never`: the block is kept but inert.
 */
export interface SpillPolicy {
  readonly to: string;
  readonly when: SpillWhen;
  /** The most a request may be predicted to wait in a local engine's queue before it spills, ms; 0 = any wait spills. */
  readonly maxQueueMs: number;
}
