// Which engines serve an API beyond Chat Completions themselves, so the
// router passes such a request through instead of translating it. One small
// table per API, read per attempt from the replica's engine
// (RouterReplica.engine), so a model whose replicas run different engines
// is served each way by each; kept apart from the relays so a general
// per-engine endpoints table can take it in whole. A remote that speaks the
// Responses API (`api: responses`) takes it as it is too.
import type { RouterReplica } from '../../ports/index.js';

/**
 * Engines that answer POST /v1/responses (OpenAI's Responses API):
 * - vllm: since 0.10 (its `/v1/responses` route; it keeps responses only
 *   with VLLM_ENABLE_RESPONSES_API_STORE, which llmgw never relies on: it
 *   sends `store: false` and the whole conversation). An older vLLM answers
 *   404, which the client sees; the router does not know a replica's version.
 * - sim: llmgw's simulated engine plays vLLM here too (src/engine/sim/responses.ts).
 * Not llamacpp (llama-server has no Responses API), sglang, or builtin:
 * those get the request translated to Chat Completions.
 */
const RESPONSES_NATIVE: ReadonlySet<string> = new Set(['vllm', 'sim']);

/** Whether a replica running `engine` serves POST /v1/responses itself; an unknown engine (absent) does not. */
export function servesResponsesNatively(engine: string | undefined): boolean {
  return engine !== undefined && RESPONSES_NATIVE.has(engine);
}

/** Whether `replica` takes a Responses request as the client wrote it: its engine serves the API, or it is a remote speaking it. */
export function takesResponsesNatively(replica: Pick<RouterReplica, 'engine' | 'remote'>): boolean {
  return servesResponsesNatively(replica.engine) || replica.remote?.api === 'responses';
}
