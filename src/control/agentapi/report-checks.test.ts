// A node's reported endpoint with a path (http://127.0.0.1:9/internal) made
// the router POST clients' prompts there, and a free-form mgmt_addr sent the
// node's bearer wherever it said; a DNS name or an odd spelling of loopback
// (127.1, 2130706433) passed the host checks and reached the same places. One table per address kind: what is taken
// (and as what) and what is refused (and why).
import { describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import {
  checkMgmtAddr,
  checkShardEndpoint,
  declaredAddressing,
  type NodeAddressing,
  screenShards,
  usableMgmtAddr,
} from './report-checks.js';

const remote: NodeAddressing = {
  sourceAddr: '10.0.0.5',
  engineHost: '10.1.0.5',
  portRange: { first: 20000, last: 20999 },
};
const older: NodeAddressing = { sourceAddr: '10.0.0.5', engineHost: null, portRange: null };
const local: NodeAddressing = {
  sourceAddr: '127.0.0.1',
  engineHost: '127.0.0.1',
  portRange: { first: 20000, last: 20999 },
};
const dualStack: NodeAddressing = { sourceAddr: '::ffff:10.0.0.5', engineHost: null, portRange: null };
// Even a node that reports from link-local, or declares it, may not name it: cloud metadata answers there.
const linkLocal: NodeAddressing = { sourceAddr: 'fe80::5', engineHost: '169.254.169.254', portRange: null };
const namedEngineHost = declaredAddressing(
  { engine_host: 'gpu7.lan', port_range: { first: 20000, last: 20999 } },
  '10.0.0.5',
);
const notAnIp = /is not an IP address .*report the node's IP address, e\.g\. with the agent's --advertise-host/;

describe('shard endpoints', () => {
  const cases: [string, NodeAddressing, string, string | RegExp][] = [
    // [what, node, endpoint, taken as | refused because]
    ['on the source address, in range', remote, 'http://10.0.0.5:20001', 'http://10.0.0.5:20001'],
    ['on the declared engine host', remote, 'http://10.1.0.5:20999', 'http://10.1.0.5:20999'],
    ['with a trailing slash', remote, 'http://10.0.0.5:20001/', 'http://10.0.0.5:20001'],
    ['bare host:port', remote, '10.0.0.5:20001', 'http://10.0.0.5:20001'],
    ['https', remote, 'https://10.0.0.5:20001', 'https://10.0.0.5:20001'],
    ['loopback from a loopback node', local, 'http://127.0.0.1:20000', 'http://127.0.0.1:20000'],
    ['an older agent: the source address, any port', older, 'http://10.0.0.5:8000', 'http://10.0.0.5:8000'],
    ['a dual-stack source address', dualStack, 'http://10.0.0.5:8000', 'http://10.0.0.5:8000'],
    ['with a path', local, 'http://127.0.0.1:20000/internal', /not http:\/\/host:port/],
    ['with a query', remote, 'http://10.0.0.5:20001?x=1', /not http:\/\/host:port/],
    ['with userinfo', remote, 'http://u:p@10.0.0.5:20001', /not http:\/\/host:port/],
    ['with a fragment', remote, 'http://10.0.0.5:20001#x', /not http:\/\/host:port/],
    ['without a port', remote, 'http://10.0.0.5', /not http:\/\/host:port/],
    ['port 0', remote, 'http://10.0.0.5:0', /not http:\/\/host:port/],
    ['another scheme', remote, 'file://10.0.0.5:20001', /not http:\/\/host:port/],
    [
      'outside the port range',
      local,
      'http://127.0.0.1:9',
      /port 9 is outside the node's engine port range 20000-20999/,
    ],
    [
      'on another host',
      remote,
      'http://10.0.0.6:20001',
      /host 10\.0\.0\.6 is not the node's own address; it may be 10\.0\.0\.5 .* or 10\.1\.0\.5/,
    ],
    ['an older agent on another host', older, 'http://10.0.0.6:8000', /it may be 10\.0\.0\.5, where it reports from/],
    ['loopback from a remote node', remote, 'http://127.0.0.1:20001', /would make the control plane call itself/],
    ['localhost from a remote node', older, 'http://localhost:8000', notAnIp],
    ['a wildcard', local, 'http://0.0.0.0:20000', /wildcard/],
    // Regression: only 127.x.x.x text was seen as loopback, and any DNS name
    // (which may be rebound to anything after the check) was taken as a host.
    ['localhost from a loopback node', local, 'http://localhost:20000', notAnIp],
    ['a DNS name', remote, 'http://gpu7.example.com:20001', notAnIp],
    ['127.1 (resolves to 127.0.0.1)', remote, 'http://127.1:20001', notAnIp],
    ['2130706433 (127.0.0.1 as one number)', remote, 'http://2130706433:20001', notAnIp],
    ['0x7f.1 (127.0.0.1 in hex)', remote, 'http://0x7f.1:20001', notAnIp],
    ['0 (resolves to 0.0.0.0)', local, 'http://0:20000', notAnIp],
    ['the source address IPv4-mapped', remote, 'http://[::ffff:10.0.0.5]:20001', 'http://10.0.0.5:20001'],
    ['the source address IPv4-mapped in hex', remote, 'http://[::FFFF:a00:5]:20001', 'http://10.0.0.5:20001'],
    ['IPv6 loopback written long, from a loopback node', local, 'http://[0:0:0:0:0:0:0:1]:20000', 'http://[::1]:20000'],
    ['another loopback address from a loopback node', local, 'http://127.0.0.2:20000', 'http://127.0.0.2:20000'],
    [
      'IPv4-mapped loopback from a remote node',
      remote,
      'http://[::ffff:127.0.0.1]:20001',
      /would make the control plane call itself/,
    ],
    ['IPv6 loopback from a remote node', remote, 'http://[::1]:20001', /would make the control plane call itself/],
    ['the IPv6 wildcard', local, 'http://[::]:20000', /wildcard/],
    ['0.0.0.0 IPv4-mapped', local, 'http://[::ffff:0.0.0.0]:20000', /wildcard/],
    ['0.1.2.3 (this network)', remote, 'http://0.1.2.3:20001', /wildcard/],
    ['cloud metadata, though declared as the engine host', linkLocal, 'http://169.254.169.254:80', /link-local/],
    ['cloud metadata IPv4-mapped', linkLocal, 'http://[::ffff:a9fe:a9fe]:80', /169\.254\.169\.254 is link-local/],
    ['IPv6 link-local, though the source address', linkLocal, 'http://[fe80::5]:80', /link-local/],
    ['IPv4 multicast', remote, 'http://224.0.0.1:20001', /multicast/],
    ['IPv6 multicast', remote, 'http://[ff02::1]:20001', /multicast/],
    ['broadcast', remote, 'http://255.255.255.255:20001', /broadcast/],
    [
      'a host beside a declared engine host that is a name',
      namedEngineHost,
      'http://10.1.0.5:20001',
      /engine host "gpu7\.lan" is not an IP address, so it was not taken: report an IP address/,
    ],
    [
      'the source address beside a declared engine host that is a name',
      namedEngineHost,
      'http://10.0.0.5:20001',
      'http://10.0.0.5:20001',
    ],
  ];
  it.each(cases)('%s', (_what, node, endpoint, want) => {
    const got = checkShardEndpoint(endpoint, node);
    if (typeof want === 'string') expect(got, `${endpoint} is taken`).toEqual({ ok: true, value: want });
    else {
      expect(got.ok, `${endpoint} is refused`).toBe(false);
      expect(got.ok ? '' : got.reason).toMatch(want);
    }
  });
});

describe('management addresses', () => {
  const cases: [string, NodeAddressing, string, string | RegExp][] = [
    ['on the source address, any port', remote, '10.0.0.5:41234', '10.0.0.5:41234'],
    ['on the engine host', remote, '10.1.0.5:7000', '10.1.0.5:7000'],
    ['loopback from a loopback node', local, '127.0.0.1:41234', '127.0.0.1:41234'],
    ['IPv6 loopback from a loopback node', local, '[::1]:41234', '[::1]:41234'],
    ['with a path', local, '127.0.0.1:9/internal', /not host:port/],
    ['with a scheme', local, 'http://127.0.0.1:9', /not host:port/],
    ['with a trailing slash', local, '127.0.0.1:9/', /not host:port/],
    ['with userinfo', local, 'x@127.0.0.1:9', /not host:port/],
    ['on another host', remote, '10.9.9.9:41234', /host 10\.9\.9\.9 is not the node's own address/],
    ['loopback from a remote node', older, '127.0.0.1:41234', /call itself/],
    ['a DNS name', remote, 'gpu7.example.com:41234', notAnIp],
    ['localhost from a loopback node', local, 'localhost:41234', notAnIp],
    ['127.1', local, '127.1:41234', notAnIp],
    ['2130706433', remote, '2130706433:41234', notAnIp],
    ['0x7f.1', remote, '0x7f.1:41234', notAnIp],
    ['0', local, '0:41234', notAnIp],
    ['the source address IPv4-mapped', dualStack, '[::ffff:10.0.0.5]:41234', '10.0.0.5:41234'],
    ['IPv4-mapped loopback from a loopback node', local, '[::ffff:127.0.0.1]:41234', '127.0.0.1:41234'],
    ['IPv4-mapped loopback from a remote node', remote, '[::ffff:7f00:1]:41234', /call itself/],
    ['the wildcard', local, '0.0.0.0:41234', /wildcard/],
    ['cloud metadata', linkLocal, '169.254.169.254:80', /link-local/],
    ['IPv6 link-local', linkLocal, '[fe80::5]:41234', /link-local/],
    ['multicast', remote, '239.1.2.3:41234', /multicast/],
  ];
  it.each(cases)('%s', (_what, node, addr, want) => {
    const got = checkMgmtAddr(addr, node);
    if (typeof want === 'string') expect(got, `${addr} is taken`).toEqual({ ok: true, value: want });
    else {
      expect(got.ok, `${addr} is refused`).toBe(false);
      expect(got.ok ? '' : got.reason).toMatch(want);
    }
  });
});

describe('what an agent declares', () => {
  it('reads engine host and port range leniently: a wildcard or a bad range is not declared', () => {
    expect(
      declaredAddressing({ engine_host: '10.1.0.5', port_range: { first: 20000, last: 20999 } }, '10.0.0.5'),
    ).toEqual(remote);
    expect(declaredAddressing({}, '10.0.0.5'), 'an older agent').toEqual(older);
    expect(declaredAddressing(undefined, '10.0.0.5')).toEqual(older);
    expect(declaredAddressing({ engine_host: '0.0.0.0', port_range: { first: 9, last: 1 } }, '10.0.0.5')).toEqual(
      older,
    );
    expect(declaredAddressing({ engine_host: 5, port_range: { first: 0, last: 70000 } }, '10.0.0.5')).toEqual(older);
    expect(declaredAddressing({ engine_host: '[::FFFF:10.1.0.5]' }, '10.0.0.5').engineHost, 'normalised').toBe(
      '10.1.0.5',
    );
    expect(declaredAddressing({ engine_host: '[::]' }, '10.0.0.5').engineHost, 'the IPv6 wildcard').toBeNull();
  });

  it('takes no name as the engine host, and says why', () => {
    expect(namedEngineHost.engineHost, 'a name may be rebound to any address after the check').toBeNull();
    expect(namedEngineHost.engineHostIgnored).toMatch(/"gpu7\.lan" is not an IP address/);
    expect(declaredAddressing({ engine_host: '127.1' }, '127.0.0.1').engineHost, 'nor an odd IPv4 spelling').toBeNull();
  });
});

describe("a heartbeat's shards", () => {
  it("keeps taken endpoints in their normal form and strips refused ones, with the reason as the shard's error", () => {
    const { shards, refused } = screenShards<ShardStatus>(
      [
        { shard_id: 's1', replica_id: 'r1', state: 'ready', endpoint: '127.0.0.1:20001' },
        { shard_id: 's2', replica_id: 'r2', state: 'ready', endpoint: 'http://127.0.0.1:9/internal' },
        { shard_id: 's3', replica_id: 'r3', state: 'fetching' },
      ],
      local,
    );
    expect(shards[0]).toEqual({ shard_id: 's1', replica_id: 'r1', state: 'ready', endpoint: 'http://127.0.0.1:20001' });
    expect(shards[1]!.endpoint, 'nothing left to route to').toBeUndefined();
    expect(shards[1]!.state, "the state is the agent's").toBe('ready');
    expect(shards[1]!.error).toMatch(/refused this shard's endpoint .* not routed to/);
    expect(shards[2]).toEqual({ shard_id: 's3', replica_id: 'r3', state: 'fetching' });
    expect(refused.map((r) => r.shardId)).toEqual(['s2']);
  });

  it('takes a stored management address only as plain host:port', () => {
    expect(usableMgmtAddr('10.0.0.5:7000')).toBe(true);
    expect(usableMgmtAddr('10.0.0.5:7000/x')).toBe(false);
    expect(usableMgmtAddr('http://10.0.0.5:7000')).toBe(false);
    expect(usableMgmtAddr('[::1]:7000'), 'loopback was judged at join, against the source address').toBe(true);
    expect(usableMgmtAddr('gpu7.lan:7000'), 'a name stored before names were refused').toBe(false);
    expect(usableMgmtAddr('127.1:7000')).toBe(false);
    expect(usableMgmtAddr('169.254.169.254:80'), 'link-local').toBe(false);
    expect(usableMgmtAddr('0.0.0.0:7000'), 'the wildcard').toBe(false);
  });
});
