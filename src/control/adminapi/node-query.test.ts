// The node list's filters and pages, as pure functions over a made-up fleet,
// and the route over a real control plane (inject): a request with no
// parameter answers the plain list as before, filters and pages ride in the
// query and the headers, and bad values are refused with what to fix.
import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';
import type { Node } from '../inventory/index.js';
import type { Liveness } from '../placement/index.js';
import {
  ALL_NODES,
  isAllNodes,
  MAX_NODE_PAGE,
  nextPageQuery,
  type NodeQuery,
  parseNodeQuery,
  selectNodes,
} from './node-query.js';

function node(id: string, over: Partial<Node> = {}, gpuClass?: string): Node {
  return {
    id,
    hostname: null,
    mgmtAddr: null,
    labels: {},
    adminState: 'ready',
    credentialHash: '',
    mgmtNonce: null,
    mgmtTokenHash: null,
    mgmtToken: '',
    approval: 'approved',
    approvedHardware: null,
    hardwareChange: null,
    agentVersion: null,
    protocolVersion: null,
    lastSeenMs: null,
    report: gpuClass ? ({ gpus: [{ index: 0, class: gpuClass, problems: [] }] } as unknown as Node['report']) : null,
    ...over,
  };
}

const q = (s: string): NodeQuery => parseNodeQuery(new URLSearchParams(s));
const ids = (nodes: readonly Node[]) => nodes.map((n) => n.id);

// 30 nodes, id order as the inventory lists them: every third cordoned, every fifth lost, racks a and b.
const fleet = Array.from({ length: 30 }, (_, i) =>
  node(
    `n${String(i).padStart(2, '0')}`,
    {
      adminState: i % 3 === 0 ? 'cordoned' : 'ready',
      labels: { rack: i % 2 ? 'b' : 'a', zone: 'z1' },
      hostname: `host-${i}.example`,
    },
    i < 10 ? 'h100-80gb' : 'a100-40gb',
  ),
);
const liveness = (n: Node): Liveness => (Number(n.id.slice(1)) % 5 === 0 ? 'lost' : 'up');

describe('node query: parsing', () => {
  it('reads no parameter as the whole list, and says so', () => {
    expect(isAllNodes(q(''))).toBe(true);
    expect(isAllNodes(ALL_NODES)).toBe(true);
    expect(isAllNodes(q('limit=5'))).toBe(false);
  });

  it('sorts state words into admin states, livenesses and pending, from repeats and commas alike', () => {
    const query = q('state=cordoned,draining&state=lost&state=pending');
    expect([...query.adminStates]).toEqual(['cordoned', 'draining']);
    expect([...query.livenesses]).toEqual(['lost']);
    expect(query.pendingOnly).toBe(true);
  });

  it('refuses bad values with what to fix', () => {
    expect(() => q('state=cordon')).toThrow(
      /unknown state "cordon" \(did you mean "cordoned"\?\).*ready, cordoned, draining/,
    );
    expect(() => q('limit=0')).toThrow(`limit: "0" is not a whole number from 1 to ${MAX_NODE_PAGE}`);
    expect(() => q('limit=ten')).toThrow(/limit: "ten"/);
    expect(() => q(`limit=${MAX_NODE_PAGE + 1}`)).toThrow(/limit/);
    expect(() => q('label==b')).toThrow(/label: "=b" has no key; want key=value/);
    expect(() => q('after=')).toThrow(/after: empty/);
    expect(() => q('status=ready')).toThrow(/unknown parameter "status" \(did you mean "state"\?\)/);
  });
});

describe('node query: selecting a page', () => {
  it('filters by admin state and liveness together (each a choice, both must hold)', () => {
    const page = selectNodes(fleet, liveness, q('state=cordoned&state=up'));
    expect(ids(page.nodes)).toEqual(['n03', 'n06', 'n09', 'n12', 'n18', 'n21', 'n24', 'n27']);
    expect(page.total).toBe(8);
    expect(page.next).toBeNull();
  });

  it('filters by labels (all must match; a key alone matches any value)', () => {
    expect(selectNodes(fleet, liveness, q('label=rack=b&label=zone=z1')).total).toBe(15);
    expect(selectNodes(fleet, liveness, q('label=rack=b&label=zone=z2')).total).toBe(0);
    expect(selectNodes(fleet, liveness, q('label=zone')).total).toBe(30);
    expect(selectNodes(fleet, liveness, q('label=owner')).total).toBe(0);
  });

  it('searches ids, hostnames and GPU classes, ignoring case', () => {
    expect(ids(selectNodes(fleet, liveness, q('q=N2')).nodes)).toEqual([
      'n20',
      'n21',
      'n22',
      'n23',
      'n24',
      'n25',
      'n26',
      'n27',
      'n28',
      'n29',
    ]);
    expect(ids(selectNodes(fleet, liveness, q('q=host-7.')).nodes)).toEqual(['n07']);
    expect(selectNodes(fleet, liveness, q('q=H100')).total).toBe(10);
  });

  it('pages in id order: each page starts after the cursor, the total counts every match, the last page has no next', () => {
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const page: ReturnType<typeof selectNodes> = selectNodes(
        fleet,
        liveness,
        q(`label=rack=a&limit=4${after ? `&after=${after}` : ''}`),
      );
      expect(page.total, 'the total is the same on every page').toBe(15);
      seen.push(...ids(page.nodes));
      after = page.next;
      pages++;
    } while (after !== null && pages < 10);
    expect(pages).toBe(4);
    expect(seen).toEqual(ids(fleet.filter((n) => n.labels.rack === 'a')));
  });

  it('gives no next page when the page ends exactly at the last match', () => {
    const page = selectNodes(fleet, liveness, q('state=lost&limit=6'));
    expect(ids(page.nodes)).toEqual(['n00', 'n05', 'n10', 'n15', 'n20', 'n25']);
    expect(page.next).toBeNull();
    expect(selectNodes(fleet, liveness, q('state=lost&limit=5')).next).toBe('n20');
  });

  it('starts after a cursor that names no node (removed since) at the next id', () => {
    expect(ids(selectNodes(fleet, liveness, q('after=n04x&limit=2')).nodes)).toEqual(['n05', 'n06']);
    expect(selectNodes(fleet, liveness, q('after=zzz')).nodes).toEqual([]);
  });

  it("keeps the caller's filters in the next page's query", () => {
    const params = new URLSearchParams('state=up&label=rack=a&label=zone=z1&limit=2&after=n01');
    expect(nextPageQuery(params, 'n08')).toBe('state=up&label=rack%3Da&label=zone%3Dz1&limit=2&after=n08');
  });
});

const TOKEN = 'admin-token-for-tests-0123456789';
const JOIN = 'join-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const plane = inProcessPlanes({ admin_token: TOKEN, join_token: JOIN });

describe('GET /api/v1/nodes with filters and pages', () => {
  it('answers the plain list without parameters, and a filtered page with X-Total-Count and Link', async () => {
    const p = await plane();
    for (let i = 0; i < 7; i++) {
      const joined = await p.agentApp.inject({
        method: 'POST',
        url: '/agent/v1/join',
        payload: { join_token: JOIN, node_id: `gpu-${i}`, hostname: `h${i}`, labels: { rack: i < 4 ? 'r1' : 'r2' } },
      });
      expect(joined.statusCode).toBe(200);
    }
    await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/gpu-5/state',
      headers: auth,
      payload: { state: 'cordon' },
    });

    const all = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes', headers: auth });
    expect(all.statusCode).toBe(200);
    expect(all.json<{ id: string }[]>().map((n) => n.id)).toEqual([
      'gpu-0',
      'gpu-1',
      'gpu-2',
      'gpu-3',
      'gpu-4',
      'gpu-5',
      'gpu-6',
    ]);
    expect(all.headers['x-total-count'], 'the plain list is answered as before, with no page headers').toBeUndefined();
    expect(all.headers.link).toBeUndefined();

    const first = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes?label=rack=r2&limit=2', headers: auth });
    expect(first.json<{ id: string }[]>().map((n) => n.id)).toEqual(['gpu-4', 'gpu-5']);
    expect(first.headers['x-total-count']).toBe('3');
    expect(first.headers.link).toBe('</api/v1/nodes?label=rack%3Dr2&limit=2&after=gpu-5>; rel="next"');
    const link = /^<([^>]+)>/.exec(String(first.headers.link))![1]!;
    const second = await p.adminApp.inject({ method: 'GET', url: link, headers: auth });
    expect(second.json<{ id: string }[]>().map((n) => n.id)).toEqual(['gpu-6']);
    expect(second.headers.link, 'the last page has no next').toBeUndefined();

    const cordoned = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes?state=cordoned', headers: auth });
    expect(cordoned.json<{ id: string; state: string }[]>()).toMatchObject([{ id: 'gpu-5', state: 'cordoned' }]);
    const found = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes?q=H3', headers: auth });
    expect(found.json<{ id: string }[]>().map((n) => n.id)).toEqual(['gpu-3']);

    const bad = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes?state=broken', headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ error: string }>().error).toContain('state: unknown state "broken"');
    const unauthenticated = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes?state=ready' });
    expect(unauthenticated.statusCode, 'the filtered list is behind the admin token like the rest').toBe(401);
  });
});
