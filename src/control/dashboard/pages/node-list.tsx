// The node list as a page of a large fleet: the filter form (state, label,
// search), how many of how many are shown, and the links to the next page
// and back to the first. The form is a plain GET, so the URL carries the
// filter (a link to it shows the same list) and it works with scripts off.
// Its own module beside the table (nodes.tsx), which stays what it was.
import type { NodeView } from '../../../api/types.js';
import { Empty } from '../components.js';
import { NodesPage } from './nodes.js';
import type { PageContext } from '../components.js';

/** Nodes a page of the list shows unless its URL asks for another number. */
export const NODES_PAGE = 50;

const STATE_CHOICES: readonly (readonly [string, string])[] = [
  ['', 'any state'],
  ['ready', 'ready'],
  ['cordoned', 'cordoned'],
  ['draining', 'draining'],
  ['up', 'up'],
  ['stale', 'stale'],
  ['lost', 'lost'],
  ['pending', 'pending approval'],
];

export interface NodeListData {
  nodes: NodeView[];
  /** Nodes that match in all. */
  total: number;
  /** The `after` of the next page; null = this is the last. */
  next: string | null;
}

export function NodeListPage({ page, filter, ctx }: { page: NodeListData; filter: URLSearchParams; ctx: PageContext }) {
  const narrowed = ['state', 'label', 'q'].some((k) => filter.has(k));
  return (
    <>
      <NodeFilter filter={filter} />
      {page.nodes.length === 0 && narrowed ? (
        <Empty>No node matches this filter.</Empty>
      ) : (
        <NodesPage nodes={page.nodes} ctx={ctx} />
      )}
      {(page.total > 0 || filter.has('after')) && (
        <p id="node-page">
          <span data-field="shown">{`Showing ${page.nodes.length} of ${page.total} node${page.total === 1 ? '' : 's'}${narrowed ? ' that match' : ''}.`}</span>
          {filter.has('after') && (
            <>
              {' '}
              <a id="first-page" href={pageHref(filter, null)}>
                First page
              </a>
            </>
          )}
          {page.next !== null && (
            <>
              {' '}
              <a id="next-page" href={pageHref(filter, page.next)}>
                Next page
              </a>
            </>
          )}
        </p>
      )}
    </>
  );
}

function NodeFilter({ filter }: { filter: URLSearchParams }) {
  const state = filter.getAll('state').join(',');
  // A state written into the URL by hand (cordoned,draining) stays chosen rather than falling back to "any".
  const choices = STATE_CHOICES.some(([v]) => v === state)
    ? STATE_CHOICES
    : [...STATE_CHOICES, [state, state] as const];
  const [label, ...moreLabels] = filter.getAll('label');
  const limit = filter.get('limit');
  return (
    <form method="get" action="/nodes" id="node-filter" class="panel">
      <label>
        State{' '}
        <select name="state">
          {choices.map(([value, text]) => (
            <option value={value} selected={value === state}>
              {text}
            </option>
          ))}
        </select>
      </label>{' '}
      <label>
        Label <input name="label" value={label ?? ''} placeholder="key=value" />
      </label>{' '}
      {moreLabels.map((l) => (
        <input type="hidden" name="label" value={l} />
      ))}
      <label>
        Search <input type="search" name="q" value={filter.get('q') ?? ''} placeholder="id, hostname or GPU class" />
      </label>{' '}
      {limit !== null && limit !== String(NODES_PAGE) && <input type="hidden" name="limit" value={limit} />}
      <button type="submit">Filter</button> <a href="/nodes">Clear</a>
    </form>
  );
}

/** This list's URL with the page moved: after `after`, or the first page (null); the default page size left out. */
function pageHref(filter: URLSearchParams, after: string | null): string {
  const out = new URLSearchParams();
  for (const [k, v] of filter) if (k !== 'after' && !(k === 'limit' && v === String(NODES_PAGE))) out.append(k, v);
  if (after !== null) out.set('after', after);
  const q = out.toString();
  return q ? `/nodes?${q}` : '/nodes';
}
