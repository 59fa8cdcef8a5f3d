// Where a weight server's redirects may take the agent. A source answering
// 302 to http://169.254.169.254/ or to an address in the operator's network
// had the agent fetch from the cloud's metadata service or an internal API
// (and report what it read as progress and errors). Only 127.0.0.1 can be
// listened on here, so the addresses other than loopback come from an
// injected resolver (names a system resolver does not know, so that a
// regression fails to resolve rather than reach another network); a refused
// hop must be refused before any connection, so nothing needs to listen there.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import type { AddressInfo, LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WeightCache } from '../cache/index.js';
import { addressClass, addressesOf, forbiddenHop, type HostLookup, sourceClasses } from './address-guard.js';
import { Fetcher, type FetcherOptions } from './fetcher.js';
import { patternBytes, sha256 } from '../../../test/support/weight-servers.js';

const CONTENT = patternBytes(64 * 1024 + 3, 7);

interface Seen {
  path: string;
  host: string | undefined;
  authorization: string | undefined;
}

/** A loopback server that answers `/to?u=<url>` with a 302 to that URL and serves CONTENT everywhere else. */
class RedirectServer {
  readonly seen: Seen[] = [];
  #server: Server | null = null;
  port = 0;

  async listen(handle?: (req: IncomingMessage, res: ServerResponse) => boolean): Promise<this> {
    this.#server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      this.seen.push({ path: url.pathname, host: req.headers.host, authorization: req.headers.authorization });
      if (handle?.(req, res)) return;
      const to = url.searchParams.get('u');
      if (url.pathname === '/to' && to) {
        res.writeHead(302, { location: to }).end();
        return;
      }
      res
        .writeHead(200, { 'content-length': String(CONTENT.length), 'content-type': 'application/octet-stream' })
        .end(CONTENT);
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }
}

/** A resolver that knows only the names it is given, as a test's DNS. */
function resolver(names: Record<string, string[]>): HostLookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (hostname: string) => {
    asked.push(hostname);
    const addresses = names[hostname];
    if (!addresses) throw Object.assign(new Error(`no such name ${hostname}`), { code: 'ENOTFOUND' });
    return addresses;
  };
  return Object.assign(lookup, { asked });
}

let base: string;
let server: RedirectServer;
let cache: WeightCache;
let dispatchers: Agent[] = [];

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'llmgw-redirect-')));
  server = await new RedirectServer().listen();
  cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
});

afterEach(async () => {
  await server.close();
  await Promise.all(dispatchers.map((d) => d.destroy()));
  dispatchers = [];
  await rm(base, { recursive: true, force: true });
});

function fetcher(options: Partial<FetcherOptions> = {}): Fetcher {
  return new Fetcher({ cache, allowHttp: true, ...options });
}

/**
 * A dispatcher that connects every name to 127.0.0.1: how a test serves a
 * source whose name the injected resolver calls public. Only the first
 * request uses it; redirects connect to the addresses they were checked at.
 */
function everythingOnLoopback(): Agent {
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all)
      return (callback as unknown as (err: null, all: { address: string; family: number }[]) => void)(null, [
        { address: '127.0.0.1', family: 4 },
      ]);
    callback(null, '127.0.0.1', 4);
  };
  const agent = new Agent({ connect: { lookup } });
  dispatchers.push(agent);
  return agent;
}

async function errorOf(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected the fetch to fail, and it succeeded');
}

const via = (to: string) => `http://127.0.0.1:${server.port}/to?u=${encodeURIComponent(to)}`;

describe('redirects of an http(s) source', () => {
  it('follow a loopback source within loopback, to the address they were checked at', async () => {
    const lookup = resolver({ 'weights.localhost': ['127.0.0.1'] });
    const result = await fetcher({ lookup }).fetch(via(`http://weights.localhost:${server.port}/m.gguf`));
    expect(sha256(await readFile(result.path)), 'the redirected file arrived whole').toBe(sha256(CONTENT));
    expect(lookup.asked, 'the hop was resolved by the fetcher, not by the system').toContain('weights.localhost');
    expect(server.seen.at(-1)?.host, 'the request still names the host it was sent to').toBe(
      `weights.localhost:${server.port}`,
    );
  });

  it('refuse to leave a loopback source for a link-local, private, mapped or unspecified address', async () => {
    const lookup = resolver({
      'metadata.example': ['169.254.169.254'],
      'internal.example': ['10.0.0.7'],
      'dual.example': ['127.0.0.1', 'fd00::5'],
      'mapped.example': ['::ffff:10.0.0.1'],
      'v6-link.example': ['fe80::1'],
      'home.example': ['192.168.1.10'],
    });
    const cases: [string, RegExp][] = [
      [
        `http://metadata.example:${server.port}/latest/meta-data/`,
        /metadata\.example:\d+, which reaches 169\.254\.169\.254, a link-local address/,
      ],
      [
        `http://internal.example:${server.port}/m.gguf`,
        /internal\.example:\d+, which reaches 10\.0\.0\.7, a private address/,
      ],
      [`http://dual.example:${server.port}/m.gguf`, /reaches fd00::5, a private address/],
      [`http://mapped.example:${server.port}/m.gguf`, /reaches ::ffff:10\.0\.0\.1, a private address/],
      [`http://v6-link.example:${server.port}/m.gguf`, /a link-local address/],
      [`http://home.example:${server.port}/m.gguf`, /a private address/],
      // 0.0.0.0 reaches this machine's listeners: here, this very server, had the hop been followed.
      [`http://0.0.0.0:${server.port}/m.gguf`, /0\.0\.0\.0, an unspecified address/],
      [`http://[::ffff:0.0.0.0]:${server.port}/m.gguf`, /an unspecified address/],
    ];
    for (const [to, why] of cases) {
      const before = server.seen.length;
      const err = await errorOf(fetcher({ lookup }).fetch(via(to)));
      expect(err.code, `${to}: ${err.message}`).toBe('LLMGW_FETCH_FAILED');
      expect(err.message, to).toMatch(why);
      expect(err.message, 'says which classes this source may reach').toMatch(
        /only to public addresses or loopback ones/,
      );
      expect(
        server.seen.length - before,
        `${to}: nothing was requested after the redirect (0.0.0.0 would have reached this server)`,
      ).toBe(1);
    }
  });

  it('refuse to leave a public source for loopback, by address or by a name that resolves there', async () => {
    // The source's name is public to the fetcher's resolver; the test's dispatcher still delivers it to this server.
    const lookup = resolver({ 'weights.example': ['93.184.216.34'], 'rebind.example': ['127.0.0.1'] });
    const source = (to: string) => `http://weights.example:${server.port}/to?u=${encodeURIComponent(to)}`;
    for (const to of [
      `http://127.0.0.1:${server.port}/m.gguf`,
      `http://rebind.example:${server.port}/m.gguf`,
      `http://[::1]:${server.port}/m.gguf`,
      `http://[::ffff:127.0.0.1]:${server.port}/m.gguf`,
    ]) {
      const before = server.seen.length;
      const err = await errorOf(fetcher({ lookup, dispatcher: everythingOnLoopback() }).fetch(source(to)));
      expect(err.code, err.message).toBe('LLMGW_FETCH_FAILED');
      expect(err.message).toMatch(
        /a loopback address; from this source a redirect is followed only to public addresses\./,
      );
      expect(server.seen.length - before, `${to}: the loopback address was never asked`).toBe(1);
    }
  });

  it('say which name could not be resolved', async () => {
    const err = await errorOf(
      fetcher({ lookup: resolver({}) }).fetch(via(`http://nowhere.example:${server.port}/m.gguf`)),
    );
    expect(err.message).toMatch(/could not resolve nowhere\.example \(ENOTFOUND\)/);
  });
});

describe('HF_TOKEN on the hub API', () => {
  it('is not sent on a redirect to another origin', async () => {
    // fetch() follows the hub API's redirects itself; the token must stay with the hub's origin.
    const elsewhere = await new RedirectServer().listen();
    try {
      const hub = await new RedirectServer().listen((req, res) => {
        res.writeHead(307, { location: `http://localhost:${elsewhere.port}${req.url ?? '/'}` }).end();
        return true;
      });
      try {
        await errorOf(
          fetcher({ hubUrl: `http://127.0.0.1:${hub.port}`, hfToken: 'hf_secret_for_the_hub' }).fetch('hf://acme/tiny'),
        );
        expect(hub.seen[0]?.authorization, 'the hub itself gets the token').toBe('Bearer hf_secret_for_the_hub');
        expect(elsewhere.seen.length, 'the redirect was followed').toBeGreaterThan(0);
        expect(
          elsewhere.seen.map((s) => s.authorization),
          'no token left the hub origin',
        ).toEqual(elsewhere.seen.map(() => undefined));
      } finally {
        await hub.close();
      }
    } finally {
      await elsewhere.close();
    }
  });
});

describe('redirects of the hub API', () => {
  it('are followed only where a file download may go', async () => {
    // The library followed the hub's redirects itself, and its probe of a file handed back where one went as the URL to download.
    const hub = await new RedirectServer().listen((_req, res) => {
      res.writeHead(302, { location: `http://metadata.example:${server.port}/latest/meta-data/` }).end();
      return true;
    });
    try {
      const lookup = resolver({ 'metadata.example': ['169.254.169.254'] });
      const err = await errorOf(
        fetcher({ hubUrl: `http://127.0.0.1:${hub.port}`, hfToken: 'hf_secret_for_the_hub', lookup }).fetch(
          'hf://acme/tiny',
        ),
      );
      expect(err.code, err.message).toBe('LLMGW_FETCH_FAILED');
      expect(err.message).toMatch(
        /redirected to http:\/\/metadata\.example:\d+, which reaches 169\.254\.169\.254, a link-local address/,
      );
      expect(server.seen, 'nothing was asked at the redirect target').toEqual([]);
    } finally {
      await hub.close();
    }
  });
});

describe('addressesOf', () => {
  it('takes an address in the URL as it is, asking no resolver', async () => {
    const lookup = resolver({});
    expect(await addressesOf(new URL('http://[fe80::1]:8/x'), lookup)).toEqual(['fe80::1']);
    expect(await addressesOf(new URL('http://169.254.169.254/x'), lookup)).toEqual(['169.254.169.254']);
    expect(await addressesOf(new URL('http://[::ffff:10.0.0.1]/x'), lookup), 'as WHATWG URL writes it').toEqual([
      '::ffff:a00:1',
    ]);
    expect(addressClass('::ffff:a00:1')).toBe('private');
    expect(lookup.asked).toEqual([]);
  });
});

describe('the classes a source may redirect into', () => {
  // They were the union of the source's own: a name answering with a public and a private address (or one
  // each time it was asked) let its public server redirect into the private network. Checked without a
  // network: a regression here would otherwise connect to a private address.
  it('are its own class only when every address of the source is of it', () => {
    expect(
      forbiddenHop(['10.0.0.7'], sourceClasses(['93.184.216.34', '10.0.0.5'])),
      'a mixed source: private is refused',
    ).toEqual({ address: '10.0.0.7', cls: 'private' });
    expect(
      forbiddenHop(['10.0.0.7'], sourceClasses(['10.0.0.5', '10.9.9.9'])),
      'a private source may stay private',
    ).toBeNull();
    expect(forbiddenHop(['127.0.0.1'], sourceClasses(['10.0.0.5'])), 'but not go to loopback').toEqual({
      address: '127.0.0.1',
      cls: 'loopback',
    });
    expect(
      forbiddenHop(['93.184.216.34'], sourceClasses(['127.0.0.1', '10.0.0.5'])),
      'public is always reachable',
    ).toBeNull();
  });
});

describe('addressClass', () => {
  it('knows each range, in every spelling', () => {
    const table: [string, string][] = [
      ['127.0.0.1', 'loopback'],
      ['127.255.0.9', 'loopback'],
      ['::1', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['10.1.2.3', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.0.1', 'private'],
      ['100.64.0.1', 'private'],
      ['fd12:3456::1', 'private'],
      ['::ffff:192.168.1.1', 'private'],
      ['64:ff9b::10.0.0.1', 'private'],
      ['2002:a00:1::', 'private'],
      ['169.254.169.254', 'link-local'],
      ['fe80::1%eth0', 'link-local'],
      ['::ffff:169.254.169.254', 'link-local'],
      ['224.0.0.1', 'reserved'],
      ['255.255.255.255', 'reserved'],
      ['ff02::1', 'reserved'],
      ['not an address', 'reserved'],
      ['172.32.0.1', 'public'],
      ['93.184.216.34', 'public'],
      ['2606:4700::1111', 'public'],
      ['::ffff:8.8.8.8', 'public'],
    ];
    for (const [address, cls] of table) expect(addressClass(address), address).toBe(cls);
  });
});
