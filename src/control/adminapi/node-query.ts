// The node list's filters and pages: which nodes GET /api/v1/nodes (and the
// dashboard's node list) answers with, decided over the inventory's snapshot
// before any view is rendered, so a page of 50 out of 10,000 renders 50. Its
// own module because it is a pure decision (parse the query, select the
// nodes) that both listeners share and that is tested without HTTP; the
// views stay what they were, and a request with no parameter gets exactly
// the list it always got.
import { LlmgwError } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';
import type { NodeView } from '../../api/types.js';
import type { Node } from '../inventory/index.js';
import type { Liveness } from '../placement/index.js';
import { nodeViews, type ViewSources } from './views.js';

/** What a caller asked for; every field absent or empty = no filter. */
export interface NodeQuery {
  /** Admin states wanted (any of them); empty = any. */
  readonly adminStates: ReadonlySet<string>;
  /** Livenesses wanted (any of them); empty = any. */
  readonly livenesses: ReadonlySet<string>;
  /** True: only nodes waiting for approval. */
  readonly pendingOnly: boolean;
  /** Every pair must match; a null value = the node has the key, whatever its value. */
  readonly labels: readonly (readonly [key: string, value: string | null])[];
  /** Lower-cased substring of the id, hostname or a GPU class; '' = none. */
  readonly q: string;
  /** Most nodes in the answer; null = all that match. */
  readonly limit: number | null;
  /** Only nodes whose id sorts after this one (the last id of the previous page); null = from the start. */
  readonly after: string | null;
}

/** A page: the nodes to render, how many matched in all, and the cursor of the next page (null = this is the last). */
export interface NodePage<T> {
  readonly nodes: T[];
  readonly total: number;
  readonly next: string | null;
}

/** The largest page one request may ask for; a whole fleet is the absence of `limit`, not a huge one. */
export const MAX_NODE_PAGE = 1000;

const ADMIN_WORDS = ['ready', 'cordoned', 'draining'];
const LIVENESS_WORDS = ['up', 'stale', 'lost'];
const STATE_WORDS = [...ADMIN_WORDS, ...LIVENESS_WORDS, 'pending'];
const PARAMS = ['state', 'label', 'q', 'limit', 'after'];

/** The query a request without parameters makes: every node, id order, one answer. */
export const ALL_NODES: NodeQuery = {
  adminStates: new Set(),
  livenesses: new Set(),
  pendingOnly: false,
  labels: [],
  q: '',
  limit: null,
  after: null,
};

/**
 * Reads the query string of a node list request. `state` and `label` may be
 * repeated, and `state` may also list words with commas: words of one kind
 * (admin state, liveness) are alternatives, kinds and labels must all hold.
 * Throws LLMGW_BAD_REQUEST naming the parameter and what it takes.
 */
export function parseNodeQuery(params: URLSearchParams): NodeQuery {
  for (const key of new Set(params.keys())) {
    if (!PARAMS.includes(key))
      throw bad(`unknown parameter "${key}"${nearest(key, PARAMS)}; the node list takes ${PARAMS.join(', ')}`);
  }
  const adminStates = new Set<string>();
  const livenesses = new Set<string>();
  let pendingOnly = false;
  for (const word of params
    .getAll('state')
    .flatMap((s) => s.split(','))
    .map((s) => s.trim().toLowerCase())) {
    if (word === '') continue;
    if (ADMIN_WORDS.includes(word)) adminStates.add(word);
    else if (LIVENESS_WORDS.includes(word)) livenesses.add(word);
    else if (word === 'pending') pendingOnly = true;
    else
      throw bad(
        `state: unknown state "${word}"${nearest(word, STATE_WORDS)}; want an admin state (ready, cordoned, draining), a liveness (up, stale, lost) or pending (waiting for approval), e.g. ?state=cordoned,draining`,
      );
  }
  const labels: [string, string | null][] = [];
  for (const raw of params.getAll('label')) {
    const eq = raw.indexOf('=');
    const key = (eq === -1 ? raw : raw.slice(0, eq)).trim();
    if (key === '')
      throw bad(`label: "${raw}" has no key; want key=value (e.g. ?label=rack=r12), or a key alone for any value`);
    labels.push([key, eq === -1 ? null : raw.slice(eq + 1)]);
  }
  const q = (params.get('q') ?? '').trim().toLowerCase();
  const limitText = params.get('limit');
  let limit: number | null = null;
  if (limitText !== null) {
    limit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_NODE_PAGE) {
      throw bad(`limit: "${limitText}" is not a whole number from 1 to ${MAX_NODE_PAGE}; leave it out for every node`);
    }
  }
  const after = params.get('after');
  if (after === '')
    throw bad('after: empty; want the last node id of the previous page (its Link header gives the next page whole)');
  return { adminStates, livenesses, pendingOnly, labels, q, limit, after };
}

/** True when the query narrows nothing: the answer is the plain list, with no page headers. */
export function isAllNodes(query: NodeQuery): boolean {
  return (
    query.adminStates.size === 0 &&
    query.livenesses.size === 0 &&
    !query.pendingOnly &&
    query.labels.length === 0 &&
    query.q === '' &&
    query.limit === null &&
    query.after === null
  );
}

/** One node against the filters (not the page). */
export function nodeMatches(node: Node, liveness: Liveness, query: NodeQuery): boolean {
  if (query.adminStates.size > 0 && !query.adminStates.has(node.adminState)) return false;
  if (query.livenesses.size > 0 && !query.livenesses.has(liveness)) return false;
  if (query.pendingOnly && node.approval !== 'pending') return false;
  for (const [key, value] of query.labels) {
    const has = node.labels[key];
    if (has === undefined || (value !== null && has !== value)) return false;
  }
  if (query.q !== '') {
    const hostname = node.hostname ?? node.report?.hostname ?? '';
    if (
      !node.id.toLowerCase().includes(query.q) &&
      !hostname.toLowerCase().includes(query.q) &&
      !(node.report?.gpus ?? []).some((g) => g.class?.toLowerCase().includes(query.q))
    ) {
      return false;
    }
  }
  return true;
}

/**
 * The page of `nodes` (in the inventory's id order, which `compareNodeIds`
 * is) that `query` asks for. Liveness is asked only of nodes past the
 * cursor, so a late page of a large fleet costs what is left of it.
 */
export function selectNodes(
  nodes: readonly Node[],
  liveness: (node: Node) => Liveness,
  query: NodeQuery,
): NodePage<Node> {
  const start = query.after === null ? 0 : firstAfter(nodes, query.after);
  const picked: Node[] = [];
  let total = 0;
  // Counted over the whole fleet (before the cursor too), so "showing 50 of 120" means the same on every page.
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i]!;
    if (!nodeMatches(n, liveness(n), query)) continue;
    total++;
    if (i >= start && (query.limit === null || picked.length < query.limit)) picked.push(n);
  }
  const last = picked[picked.length - 1];
  let next: string | null = null;
  if (query.limit !== null && picked.length === query.limit && last) {
    // Another page only when a match remains past this one.
    for (let i = nodes.indexOf(last) + 1; i < nodes.length; i++) {
      const n = nodes[i]!;
      if (nodeMatches(n, liveness(n), query)) {
        next = last.id;
        break;
      }
    }
  }
  return { nodes: picked, total, next };
}

/** The views of the page `query` asks for: the nodes are chosen first, and only they are rendered. */
export function nodeViewPage(src: ViewSources, query: NodeQuery): NodePage<NodeView> {
  const inv = src.inventory;
  if (!inv) return { nodes: [], total: 0, next: null };
  if (isAllNodes(query)) {
    const views = nodeViews(src);
    return { nodes: views, total: views.length, next: null };
  }
  const now = src.now?.() ?? Date.now();
  const page = selectNodes(inv.list(), (n) => inv.liveness(n, now), query);
  return { ...page, nodes: nodeViews(src, page.nodes) };
}

/** The order of Inventory.list(): the cursor compares ids the way the list is sorted. */
export function compareNodeIds(a: string, b: string): number {
  return a.localeCompare(b);
}

/** Index of the first node whose id sorts after `id` (binary search: the list is in id order). */
function firstAfter(nodes: readonly Node[], id: string): number {
  let lo = 0;
  let hi = nodes.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareNodeIds(nodes[mid]!.id, id) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The query string of the next page: the caller's own parameters with
 * `after` moved on, so a client that follows Link gets the same filter.
 */
export function nextPageQuery(params: URLSearchParams, next: string): string {
  const out = new URLSearchParams();
  for (const [k, v] of params) if (k !== 'after') out.append(k, v);
  out.set('after', next);
  return out.toString();
}

function bad(message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message);
}

/** ` (did you mean "x"?)` for a near miss among `words`, else ''. */
function nearest(word: string, words: readonly string[]): string {
  const near = nearestName(word, words);
  return near ? ` (did you mean "${near}"?)` : '';
}
