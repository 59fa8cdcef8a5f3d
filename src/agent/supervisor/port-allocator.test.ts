// Ports from the range, checked by binding them on loopback for real.
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LlmgwError } from '../../errors/index.js';
import { PortAllocator, bindTest } from './port-allocator.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function listening(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
  return (server.address() as { port: number }).port;
}

describe('PortAllocator', () => {
  it('skips a port another process holds, found by binding it', async () => {
    const busy = await listening();
    expect(await bindTest('127.0.0.1', busy)).toBe(false);
    const ports = new PortAllocator({ firstPort: busy, lastPort: Math.min(65535, busy + 5) });
    const got = await ports.allocate('s1', '127.0.0.1');
    expect(got, 'not the bound port').not.toBe(busy);
    expect(ports.holderOf(got)).toBe('s1');
  });

  it('hands ports out round-robin, and says what holds the range when it is used up', async () => {
    const ports = new PortAllocator({
      firstPort: 30000,
      lastPort: 30002,
      isFree: (_h, port) => Promise.resolve(port !== 30001),
    });
    expect(await ports.allocate('a', 'h')).toBe(30000);
    expect(await ports.allocate('b', 'h')).toBe(30002);
    ports.release(30000, 'a');
    const err = await ports.allocate('c', 'h').catch((e: unknown) => e);
    expect(err, 'the freed 30000 is the only one left, and round robin reaches it').toBe(30000);
    const exhausted = await ports.allocate('d', 'h').catch((e: unknown) => e);
    expect(exhausted).toBeInstanceOf(LlmgwError);
    expect((exhausted as LlmgwError).code).toBe('LLMGW_PORT_EXHAUSTED');
    expect((exhausted as LlmgwError).message).toBe(
      "no free port in 30000-30002 for shard d: 2 held by engines of this agent, 1 taken by other processes; widen the agent's engine port range or stop something",
    );
  });

  it('lets a holder claim its own port again, refuses another holder, and ignores a release by a non-holder', () => {
    const ports = new PortAllocator({ isFree: () => Promise.resolve(true) });
    expect(ports.claim(20500, 'a')).toBe(true);
    expect(ports.claim(20500, 'a')).toBe(true);
    expect(ports.claim(20500, 'b')).toBe(false);
    ports.release(20500, 'b');
    expect(ports.holderOf(20500)).toBe('a');
  });

  it('gives two concurrent allocations two ports', async () => {
    const ports = new PortAllocator({
      firstPort: 31000,
      lastPort: 31001,
      isFree: () => new Promise((resolve) => setImmediate(() => resolve(true))),
    });
    const got = await Promise.all([ports.allocate('a', 'h'), ports.allocate('b', 'h')]);
    expect(new Set(got).size).toBe(2);
  });

  it('refuses a range that is not one, and a host that is not this machine', async () => {
    expect(() => new PortAllocator({ firstPort: 21000, lastPort: 20000 })).toThrow(/not valid/);
    // 192.0.2.1 is TEST-NET-1: never an address of this machine, so the bind fails without touching any network.
    await expect(bindTest('192.0.2.1', 20000)).rejects.toThrow(/is 192\.0\.2\.1 an address of this machine/);
  });
});
