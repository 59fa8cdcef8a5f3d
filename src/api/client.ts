// The admin API client: one typed method per endpoint the control plane
// serves under /api/v1, and two typed errors — the server said no
// (AdminApiError, with its status and its own words) and the server could not
// be reached (AdminApiUnreachableError, with what to do about it). Everything
// it needs is passed in (base URL, token, actor, dispatcher), so ctl, tests
// and the dashboard tests each build their own.
import { type Dispatcher, request } from 'undici';
import { certificateProblem } from '../tls/index.js';
import type {
  AddedView,
  CollectSummary,
  EventsView,
  ControlPlaneView,
  ExplainView,
  NodeDetailView,
  ModelDefinition,
  ModelView,
  NodeStateView,
  NodeStateWord,
  NodeListPage,
  NodeListQuery,
  NodeView,
  NodeApprovedView,
  NodeRemovedView,
  JoinTokenCreatedView,
  JoinTokenView,
  OrphansView,
  RemovedView,
  ReplicaView,
  SummaryView,
  CreatedKeyView,
  KeyView,
  ModelLogView,
  ModelPlansView,
  NewKey,
  UsageView,
  AuditView,
  NodeDisksView,
  RequestDetailView,
  RequestsView,
} from './types.js';
import type { BudgetChange, BudgetView, NewBudget, NewTeam, SpendView, TeamChange, TeamView } from './money-types.js';
import type {
  DeviceLoginPollView,
  DeviceLoginView,
  LoginInfoView,
  NewPerson,
  PersonTokenIssuedView,
  PersonTokenView,
  PersonView,
  WhoAmIView,
} from './people-types.js';

import type { ShadowsView } from './traffic-types.js';
import type { BatchAdminView, BatchesAdminView } from './batch-types.js';

export interface AdminClientOptions {
  /** e.g. http://127.0.0.1:8081; a trailing slash is ignored. */
  baseUrl: string;
  /** The admin token; null or absent = send none (a loopback control plane may need none). */
  token?: string | null;
  /** Who is acting, sent as X-Llmgw-Actor for the audit log; absent = not sent. */
  actor?: string;
  /** Absent = undici's global dispatcher. */
  dispatcher?: Dispatcher;
  /** How long to wait for the answer's headers, ms; absent = 30 s. 0 = no limit. */
  timeoutMs?: number;
}

/**
 * Why the server refused, as far as the client can tell. The admin API's
 * error body is only `{"error": message}`, so this is derived here, in one
 * place, from the status and (for the no-fit refusal, which shares 400 with
 * every other bad definition) the server's fixed wording.
 */
export type AdminApiErrorKind =
  'placement_no_fit' | 'unauthorized' | 'not_found' | 'no_store' | 'bad_request' | 'server';

/** The server answered, and not with success. */
export class AdminApiError extends Error {
  readonly status: number;
  /** The server's `error` field, or the start of its body when it sent no JSON. */
  readonly serverMessage: string;
  readonly method: string;
  readonly path: string;
  readonly kind: AdminApiErrorKind;

  constructor(init: { status: number; serverMessage: string; method: string; path: string }) {
    super(init.serverMessage || `the admin API answered ${init.status} to ${init.method} ${init.path}`);
    this.name = 'AdminApiError';
    this.status = init.status;
    this.serverMessage = init.serverMessage;
    this.method = init.method;
    this.path = init.path;
    this.kind = kindOf(init.status, init.serverMessage);
  }
}

/** No answer at all: nothing listening, a wrong host, a timeout. */
export class AdminApiUnreachableError extends Error {
  readonly baseUrl: string;
  /** Why, in a few words ("connection refused"), for callers that word their own message. */
  readonly detail: string;

  constructor(baseUrl: string, detail: string, cause: unknown) {
    super(`cannot reach the admin API at ${baseUrl} (${detail}): is \`llmgw control\` running? set LLMGW_ADMIN_URL`, {
      cause,
    });
    this.name = 'AdminApiUnreachableError';
    this.baseUrl = baseUrl;
    this.detail = detail;
  }
}

/** The server's fixed opening for LLMGW_PLACEMENT_NO_FIT (src/control/adminapi/routes.ts). */
const NO_FIT_WORDING = 'no known node could ever run this model';

function kindOf(status: number, message: string): AdminApiErrorKind {
  if (status === 401 || status === 403) return 'unauthorized';
  if (status === 404) return 'not_found';
  if (status === 501) return 'no_store';
  if (status >= 500) return 'server';
  if (message.startsWith(NO_FIT_WORDING)) return 'placement_no_fit';
  return 'bad_request';
}

export class AdminClient {
  readonly baseUrl: string;
  readonly #token: string | null;
  readonly #actor: string | undefined;
  readonly #dispatcher: Dispatcher | undefined;
  readonly #timeoutMs: number;

  constructor(options: AdminClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#token = options.token ?? null;
    this.#actor = options.actor;
    this.#dispatcher = options.dispatcher;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  summary(): Promise<SummaryView> {
    return this.#call('GET', '/api/v1/summary');
  }

  nodes(): Promise<NodeView[]> {
    return this.#call('GET', '/api/v1/nodes');
  }

  /** One page of the node list, filtered; the page's total and next cursor come from its headers. */
  async nodesPage(query: NodeListQuery = {}): Promise<NodeListPage> {
    const q = new URLSearchParams();
    for (const s of query.state ?? []) q.append('state', s);
    for (const l of query.labels ?? []) q.append('label', l);
    if (query.q) q.set('q', query.q);
    if (query.limit !== undefined) q.set('limit', String(query.limit));
    if (query.after) q.set('after', query.after);
    const s = q.toString();
    const { body, headers } = await this.#exchange<NodeView[]>('GET', `/api/v1/nodes${s ? `?${s}` : ''}`);
    const totalHeader = headers['x-total-count'];
    const total = typeof totalHeader === 'string' && /^\d+$/.test(totalHeader) ? Number(totalHeader) : null;
    return { nodes: body, total, next: nextCursor(headers.link) };
  }

  /** Cordon (no new replicas), drain (also move existing ones off) or ready (uncordon). */
  setNodeState(nodeId: string, state: NodeStateWord): Promise<NodeStateView> {
    return this.#call('POST', `/api/v1/nodes/${encodeURIComponent(nodeId)}/state`, { state });
  }

  cordon(nodeId: string): Promise<NodeStateView> {
    return this.setNodeState(nodeId, 'cordon');
  }

  uncordon(nodeId: string): Promise<NodeStateView> {
    return this.setNodeState(nodeId, 'uncordon');
  }

  drain(nodeId: string): Promise<NodeStateView> {
    return this.setNodeState(nodeId, 'drain');
  }

  /**
   * Removes a node: its credential stops working and its id is free to join
   * again. A live node with replicas is refused unless `force` (they are then
   * replaced elsewhere, as a lost node's are).
   */
  removeNode(nodeId: string, options: { force?: boolean } = {}): Promise<NodeRemovedView> {
    return this.#call('DELETE', `/api/v1/nodes/${encodeURIComponent(nodeId)}${options.force ? '?force=true' : ''}`);
  }

  /** Lets a pending node take placements, and accepts the GPUs it reports now. */
  approveNode(nodeId: string): Promise<NodeApprovedView> {
    return this.#call('POST', `/api/v1/nodes/${encodeURIComponent(nodeId)}/approve`, {});
  }

  /** A single-use token that lets only `node` join, for `expires` (a duration like "1h"; absent = 1h). */
  createJoinToken(input: { node: string; expires?: string }): Promise<JoinTokenCreatedView> {
    return this.#call('POST', '/api/v1/join-tokens', input);
  }

  joinTokens(): Promise<JoinTokenView[]> {
    return this.#call('GET', '/api/v1/join-tokens');
  }

  models(): Promise<ModelView[]> {
    return this.#call('GET', '/api/v1/models');
  }

  /** `force`: add it even when no known node could ever run it (a fleet still joining). */
  addModel(
    definition: ModelDefinition | Record<string, unknown>,
    options: { force?: boolean } = {},
  ): Promise<AddedView> {
    return this.#call('POST', `/api/v1/models${options.force ? '?force=true' : ''}`, definition);
  }

  /** Takes the model's exact name. */
  removeModel(name: string): Promise<RemovedView> {
    return this.#call('DELETE', `/api/v1/models/${encodeURIComponent(name)}`);
  }

  /** Every replica, or those of one model (by name). */
  replicas(options: { model?: string } = {}): Promise<ReplicaView[]> {
    return this.#call('GET', `/api/v1/replicas${query({ model: options.model })}`);
  }

  /** The control-plane instances sharing the store, and which one leads the reconciler. */
  controlPlanes(): Promise<ControlPlaneView[]> {
    return this.#call('GET', '/api/v1/control-planes');
  }

  /** One node with why it is idle and what its drain waits for. */
  node(nodeId: string): Promise<NodeDetailView> {
    return this.#call('GET', `/api/v1/nodes/${encodeURIComponent(nodeId)}`);
  }

  explain(model: string): Promise<ExplainView> {
    return this.#call('GET', `/api/v1/explain-placement${query({ model })}`);
  }

  orphans(options: { node?: string } = {}): Promise<OrphansView> {
    return this.#call('GET', `/api/v1/weights/orphans${query({ node: options.node })}`);
  }

  /** Asks nodes to remove their orphans; each node waits up to a minute, so this waits without a limit. */
  collect(options: { node?: string } = {}): Promise<CollectSummary> {
    return this.#call('POST', `/api/v1/weights/collect${query({ node: options.node })}`, undefined, 0);
  }

  /** Where each model would be placed if it were added now; nothing is added. */
  planModels(definitions: readonly (ModelDefinition | Record<string, unknown>)[]): Promise<ModelPlansView> {
    return this.#call('POST', '/api/v1/models/plan', { models: definitions });
  }

  /** The newest `lines` of a replica's engine log (rank 0 unless `shard` says otherwise), fetched from its node. */
  replicaLog(replicaId: string, options: { shard?: number; lines?: number } = {}): Promise<ModelLogView> {
    const q = query({
      shard: options.shard === undefined ? undefined : String(options.shard),
      lines: options.lines === undefined ? undefined : String(options.lines),
    });
    return this.#call('GET', `/api/v1/replicas/${encodeURIComponent(replicaId)}/log${q}`);
  }

  keys(): Promise<{ keys: KeyView[] }> {
    return this.#call('GET', '/api/v1/keys');
  }

  /** The answer holds the secret, shown this once. */
  createKey(key: NewKey): Promise<CreatedKeyView> {
    return this.#call('POST', '/api/v1/keys', key);
  }

  /** Takes the key's exact id. */
  revokeKey(id: string): Promise<{ id: string; state: 'revoked' }> {
    return this.#call('DELETE', `/api/v1/keys/${encodeURIComponent(id)}`);
  }

  teams(): Promise<{ teams: TeamView[] }> {
    return this.#call('GET', '/api/v1/teams');
  }

  createTeam(team: NewTeam): Promise<TeamView> {
    return this.#call('POST', '/api/v1/teams', team);
  }

  /** Only the fields named change; null clears a limit. */
  setTeam(name: string, change: TeamChange): Promise<TeamView> {
    return this.#call('POST', `/api/v1/teams/${encodeURIComponent(name)}`, change);
  }

  /** Refused while the team holds live keys, and for `default`. */
  deleteTeam(name: string): Promise<{ name: string; state: 'deleted' }> {
    return this.#call('DELETE', `/api/v1/teams/${encodeURIComponent(name)}`);
  }

  budgets(): Promise<{ budgets: BudgetView[] }> {
    return this.#call('GET', '/api/v1/budgets');
  }

  createBudget(budget: NewBudget): Promise<BudgetView> {
    return this.#call('POST', '/api/v1/budgets', budget);
  }

  setBudget(id: string, change: BudgetChange): Promise<BudgetView> {
    return this.#call('POST', `/api/v1/budgets/${encodeURIComponent(id)}`, change);
  }

  /** Takes the budget's exact id. */
  deleteBudget(id: string): Promise<{ id: string; state: 'deleted' }> {
    return this.#call('DELETE', `/api/v1/budgets/${encodeURIComponent(id)}`);
  }

  /** Spend per team, key and model, and each model's measured cost per million tokens. */
  spend(): Promise<SpendView> {
    return this.#call('GET', '/api/v1/spend');
  }

  /** `endpoint` absent = every endpoint's rows. */
  usage(options: { endpoint?: string } = {}): Promise<UsageView[]> {
    return this.#call(
      'GET',
      `/api/v1/usage${options.endpoint === undefined ? '' : `?endpoint=${encodeURIComponent(options.endpoint)}`}`,
    );
  }

  /** Newest first; `limit` absent = 100 (the server caps it at 1000); `after` = only events with a greater id (for following). */
  events(options: { model?: string; limit?: number; after?: number } = {}): Promise<EventsView> {
    return this.#call(
      'GET',
      `/api/v1/events${query({ model: options.model, limit: options.limit === undefined ? undefined : String(options.limit), after: options.after === undefined ? undefined : String(options.after) })}`,
    );
  }

  /** What changed and who did it, newest first. `since`: a duration back (30m, 7d) or an RFC 3339 time. */
  audit(
    options: { since?: string; actor?: string; action?: string; target?: string; limit?: number } = {},
  ): Promise<AuditView> {
    return this.#call(
      'GET',
      `/api/v1/audit${query({ ...options, limit: options.limit === undefined ? undefined : String(options.limit) })}`,
    );
  }

  /** One request by the x-request-id the router sent back, from the answering control plane's log, with its timeline. */
  request(id: string): Promise<RequestDetailView> {
    return this.#call('GET', `/api/v1/requests/${encodeURIComponent(id)}`);
  }

  /** Recent requests, newest first. */
  requests(
    options: { id?: string; model?: string; status?: number; failed?: boolean; limit?: number } = {},
  ): Promise<RequestsView> {
    const q = {
      id: options.id,
      model: options.model,
      status: options.status === undefined ? undefined : String(options.status),
      failed: options.failed ? 'true' : undefined,
      limit: options.limit === undefined ? undefined : String(options.limit),
    };
    return this.#call('GET', `/api/v1/requests${query(q)}`);
  }

  /** Each shadowed model against its candidate: this control plane's comparison (docs/splits-and-shadows.md). */
  shadows(): Promise<ShadowsView> {
    return this.#call('GET', '/api/v1/shadows');
  }

  /** Every batch (a team-admin: its teams'), newest first, with progress and an estimated finish (docs/batches.md). */
  batches(): Promise<BatchesAdminView> {
    return this.#call('GET', '/api/v1/batches');
  }

  batch(id: string): Promise<BatchAdminView> {
    return this.#call('GET', `/api/v1/batches/${encodeURIComponent(id)}`);
  }

  /** Cancels a validating or in-progress batch: lines running finish, the rest are closed as cancelled. */
  cancelBatch(id: string): Promise<BatchAdminView> {
    return this.#call('POST', `/api/v1/batches/${encodeURIComponent(id)}/cancel`, {});
  }

  /** Where one node's disk went: per filesystem, weights by model, orphans, the rest. */
  nodeDisks(id: string): Promise<NodeDisksView> {
    return this.#call('GET', `/api/v1/nodes/${encodeURIComponent(id)}/disks`);
  }

  /** Who this client's token is: the person, role and permissions. */
  whoami(): Promise<WhoAmIView> {
    return this.#call('GET', '/api/v1/whoami');
  }

  people(): Promise<{ people: PersonView[] }> {
    return this.#call('GET', '/api/v1/people');
  }

  /** Makes a person with a role and a first token (in the answer, this once). */
  createPerson(person: NewPerson): Promise<PersonView & PersonTokenIssuedView> {
    return this.#call('POST', '/api/v1/people', person);
  }

  /** A new token for the person; every other token of theirs ends now. */
  rotatePerson(name: string, options: { expires_in?: string } = {}): Promise<PersonTokenView & PersonTokenIssuedView> {
    return this.#call('POST', `/api/v1/people/${encodeURIComponent(name)}/rotate`, options);
  }

  /** Ends every token of the person now; the person stays. */
  expirePerson(name: string): Promise<{ name: string; tokens_expired: number }> {
    return this.#call('POST', `/api/v1/people/${encodeURIComponent(name)}/expire`, {});
  }

  deletePerson(name: string): Promise<{ name: string; deleted: true }> {
    return this.#call('DELETE', `/api/v1/people/${encodeURIComponent(name)}`);
  }

  /** What `ctl login` can do here: public, asks no token. */
  loginInfo(): Promise<LoginInfoView> {
    return this.#call('GET', '/api/v1/login');
  }

  /** Starts ctl login's device flow: public; the handle it returns is a secret to poll with. */
  startDeviceLogin(): Promise<DeviceLoginView> {
    return this.#call('POST', '/api/v1/login/device', {});
  }

  /** Pending until the person approves the code; then their new token, once. */
  pollDeviceLogin(handle: string): Promise<DeviceLoginPollView> {
    return this.#call('POST', `/api/v1/login/device/${encodeURIComponent(handle)}`, {});
  }

  async #call<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    timeoutMs = this.#timeoutMs,
  ): Promise<T> {
    return (await this.#exchange<T>(method, path, body, timeoutMs)).body;
  }

  /** A call whose answer's headers matter too (the node list's page headers). */
  async #exchange<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    timeoutMs = this.#timeoutMs,
  ): Promise<{ body: T; headers: Dispatcher.ResponseData['headers'] }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (this.#actor) headers['x-llmgw-actor'] = this.#actor;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${this.baseUrl}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(this.#dispatcher ? { dispatcher: this.#dispatcher } : {}),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (err) {
      throw new AdminApiUnreachableError(this.baseUrl, describeNetworkError(err), err);
    }
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300) {
      throw new AdminApiError({
        status: res.statusCode,
        serverMessage: errorMessageOf(text),
        method,
        path: path.split('?')[0]!,
      });
    }
    try {
      return { body: JSON.parse(text) as T, headers: res.headers };
    } catch {
      throw new AdminApiError({
        status: res.statusCode,
        serverMessage: `the answer to ${method} ${path} is not JSON: ${text.slice(0, 200)}`,
        method,
        path,
      });
    }
  }
}

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The `after` of a Link header's rel="next" URL; null = no next page. */
function nextCursor(link: string | string[] | undefined): string | null {
  for (const part of (Array.isArray(link) ? link.join(',') : (link ?? '')).split(',')) {
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(part);
    if (m) return new URLSearchParams(m[1]!.split('?')[1] ?? '').get('after');
  }
  return null;
}

function errorMessageOf(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // Not JSON (a proxy's HTML page, say): show its start below.
  }
  return text.trim().slice(0, 200);
}

/** "connection refused" rather than undici's class names: the reader wants to know what happened. */
function describeNetworkError(err: unknown): string {
  // A private CA's certificate checked against the system's CAs (or another CA), a name it lacks, an http port.
  const tls = certificateProblem(err, '--ca (or LLMGW_CA)');
  if (tls) return tls;
  const code = (err as { code?: string }).code ?? (err as { cause?: { code?: string } }).cause?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'the host name does not resolve';
    case 'ECONNRESET':
      return 'the connection was reset';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return 'no answer in time';
    default:
      return (err as Error).message || String(err);
  }
}
