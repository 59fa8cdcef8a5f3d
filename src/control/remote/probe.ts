// One health probe of a remote endpoint: a cheap GET its API answers without
// generating anything (`/v1/models` for an OpenAI-compatible API; for a peer
// llmgw, `/v1/llmgw/capacity`, which also says how loaded its fleet is), and
// the pure judgement of what came back. The judgement is table-tested; the
// request is the edge.
import { request } from 'undici';
import { remoteKeyHeaders, type ReplicaLoad } from '../../gateway/index.js';
import type { RemoteApi } from '../catalog/remote.js';

/** What a probe saw: a status and body, or a network failure in words. */
export type ProbeResult = { readonly status: number; readonly body: unknown } | { readonly error: string };

/** A remote's health after a probe. */
export interface RemoteHealth {
  readonly healthy: boolean;
  /** Why not, in words for describe() and the views; '' when healthy. */
  readonly reason: string;
  /** A peer's fleet load for its model; absent = not a peer, or it did not say. */
  readonly load?: Omit<ReplicaLoad, 'sampledAtMs'>;
  /** A peer's ready replicas of the model; absent = not known. */
  readonly replicas?: number;
}

/** The path probed for each API (Anthropic's and OpenAI's Responses APIs list models at /v1/models too). */
export function probePath(api: RemoteApi): string {
  return api === 'llmgw' ? '/v1/llmgw/capacity' : '/v1/models';
}

/** The headers a probe of `api` is sent with: its key (and version) as the gateway sends them with each request. */
export function probeHeaders(api: RemoteApi, apiKey: string | undefined): Record<string, string> {
  return { accept: 'application/json', ...remoteKeyHeaders(api, apiKey || undefined) };
}

/** What a probe's result says of the remote serving `servedModel`. */
export function judgeProbe(api: RemoteApi, servedModel: string, result: ProbeResult): RemoteHealth {
  if ('error' in result) return { healthy: false, reason: `unreachable: ${result.error}` };
  const { status, body } = result;
  // A remote that is busy is healthy: its 429 is waited out per request, not by taking it out of routing.
  if (status === 429) return { healthy: true, reason: '' };
  if (status === 401 || status === 403)
    return { healthy: false, reason: `it refused the configured API key (${status}); check api_key or api_key_file` };
  if (status < 200 || status >= 300) return { healthy: false, reason: `its ${probePath(api)} answered ${status}` };
  if (api !== 'llmgw') return { healthy: true, reason: '' };
  const models = (body as { models?: unknown } | null)?.models;
  const entry = Array.isArray(models)
    ? (models as { id?: unknown }[]).find((m) => m && typeof m === 'object' && m.id === servedModel)
    : undefined;
  if (!entry) return { healthy: false, reason: `the peer does not serve "${servedModel}" to this key` };
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  const e = entry as { ready?: unknown; running?: unknown; waiting?: unknown };
  const replicas = num(e.ready);
  const load = { running: num(e.running), waiting: num(e.waiting) };
  if (replicas === 0)
    return { healthy: false, reason: `the peer has no ready replica of "${servedModel}"`, load, replicas };
  return { healthy: true, reason: '', load, replicas };
}

/** GETs `url` + the API's probe path with the key, within `timeoutMs`. */
export async function runProbe(
  url: string,
  api: RemoteApi,
  apiKey: string | undefined,
  timeoutMs: number,
): Promise<ProbeResult> {
  try {
    const res = await request(url + probePath(api), {
      method: 'GET',
      headers: probeHeaders(api, apiKey),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.body.text();
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: only its status counts.
    }
    return { status: res.statusCode, body };
  } catch (err) {
    const e = err as { code?: string; message?: string; name?: string };
    return {
      error: e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e.code ?? e.message ?? 'failed'),
    };
  }
}
