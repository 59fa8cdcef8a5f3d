// Real networks between the processes of a test, on this machine only: each
// host (a control plane, an agent and its engines) gets a Linux network
// namespace of its own, joined by a veth pair to one bridge, with an address
// in 10.231.0.0/16. The network is then broken for real, in the kernel, not in
// a proxy the code under test could tell apart: a partition drops packets with
// nftables (no RST, no ICMP, so connections hang rather than fail, as behind a
// dead switch port), loss drops a share of them at random, latency delays
// them. Separate from processes.ts because it needs root and `ip netns`, and
// only the network-fault tests pay for that.
//
// Latency: `tc qdisc ... netem` is the usual tool, but many kernels (this
// CI's among them) ship without sch_netem. The lab detects it and uses it
// where present; elsewhere it puts a small TCP relay that holds every chunk
// for the delay on the path, which delays the bytes the same way, though not
// the handshake.
//
// Everything a lab creates is named `llmgw-<pid>-…` (interfaces `lg<pid>…`,
// which the kernel limits to 15 characters) and removed by teardown(), so
// labs of parallel test files never meet, and nothing outside them is touched.
import { execFileSync } from 'node:child_process';
import { createServer, type Server, type Socket, connect } from 'node:net';
import { describe, it } from 'vitest';

/** What this machine allows: root, `ip netns`, nftables; and whether the kernel has netem. */
export interface NetnsSupport {
  ok: boolean;
  /** Why the lab cannot run here; empty when it can. */
  reason: string;
  netem: boolean;
}

function run(cmd: string, args: readonly string[], input?: string): string {
  return execFileSync(cmd, args, {
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
    ...(input !== undefined ? { input } : {}),
  });
}

function quietly(cmd: string, args: readonly string[]): void {
  try {
    run(cmd, args);
  } catch {
    // Already gone: teardown is idempotent.
  }
}

/** Tries what the lab needs in a throwaway namespace, once per process. */
export const NETNS: NetnsSupport = (() => {
  if (process.platform !== 'linux')
    return { ok: false, reason: 'network namespaces are a Linux feature', netem: false };
  if (process.getuid?.() !== 0) return { ok: false, reason: 'creating network namespaces needs root', netem: false };
  const ns = `llmgw-${process.pid}-probe`;
  try {
    run('ip', ['netns', 'add', ns]);
  } catch (err) {
    return { ok: false, reason: `ip netns add failed (${firstLine(err)}); install iproute2`, netem: false };
  }
  try {
    try {
      run(
        'ip',
        ['netns', 'exec', ns, 'nft', '-f', '-'],
        'table inet llmgw {\n  chain input { type filter hook input priority 0; policy accept; numgen random mod 100 < 1 drop; }\n}\n',
      );
    } catch (err) {
      return { ok: false, reason: `nftables does not work here (${firstLine(err)}); install nftables`, netem: false };
    }
    let netem = true;
    try {
      run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      run('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '1ms']);
    } catch {
      netem = false;
    }
    return { ok: true, reason: '', netem };
  } finally {
    quietly('ip', ['netns', 'del', ns]);
  }
})();

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return (e.stderr?.trim() || e.message || String(err)).split('\n')[0]!;
}

/**
 * A describe block that needs the lab: skipped with the reason where the
 * machine does not allow it; under CI, where it must run, a failing test
 * instead, since a skipped suite would pass for the wrong reason.
 */
export function describeNetns(name: string, fn: () => void): void {
  if (NETNS.ok) {
    describe(name, fn);
    return;
  }
  if (process.env.CI) {
    describe(name, () => {
      it('can create network namespaces', () => {
        throw new Error(
          `CI is set but "${name}" cannot run: ${NETNS.reason} (.ci/run runs as root and installs iproute2 and nftables)`,
        );
      });
    });
    return;
  }
  console.warn(`"${name}" is skipped: ${NETNS.reason}`);
  describe.skip(`${name} (skipped: ${NETNS.reason})`, fn);
}

/** One namespace on the lab's bridge. */
export interface NetHost {
  readonly name: string;
  readonly ns: string;
  /** Its address on the bridge. */
  readonly addr: string;
  /** The command prefix that runs a program inside it (processes.ts `prefix`). */
  readonly prefix: readonly string[];
  /** Its veth's end in the root namespace, on the bridge. */
  readonly link: string;
}

interface Faults {
  isolated: boolean;
  /** Peers whose packets are dropped both ways. */
  cutFrom: Set<string>;
  /** Percent of packets dropped each way, 0 = none. */
  lossPercent: number;
}

export class NetLab {
  readonly hosts = new Map<string, NetHost>();
  /** The root namespace's address on the bridge: where relays the lab runs listen. */
  readonly gateway: string;
  readonly #faults = new Map<string, Faults>();
  readonly #relays: TcpRelay[] = [];
  readonly #tag: string;
  readonly #bridge: string;
  readonly #subnet: string;
  #next = 2;

  private constructor(tag: string, subnet: string) {
    this.#tag = tag;
    this.#subnet = subnet;
    this.#bridge = `${tag}b`;
    this.gateway = `${subnet}.1`;
  }

  /** A bridge with a /24 of 10.231.0.0/16 no other lab on this machine uses. */
  static create(): NetLab {
    if (!NETNS.ok) throw new Error(`NetLab: ${NETNS.reason}`);
    const used = new Set(
      [...run('ip', ['-o', '-4', 'addr', 'show']).matchAll(/inet 10\.231\.(\d+)\./g)].map((m) => Number(m[1])),
    );
    const start = process.pid % 200;
    let third = -1;
    for (let i = 0; i < 250 && third < 0; i++) if (!used.has((start + i) % 250)) third = (start + i) % 250;
    if (third < 0)
      throw new Error('NetLab: every /24 of 10.231.0.0/16 is taken; tear down stale labs (ip -o addr | grep 10.231)');
    const lab = new NetLab(`lg${process.pid.toString(36)}`, `10.231.${third}`);
    run('ip', ['link', 'add', lab.#bridge, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${lab.gateway}/24`, 'dev', lab.#bridge]);
    run('ip', ['link', 'set', lab.#bridge, 'up']);
    return lab;
  }

  /** A new namespace named `llmgw-<pid>-<name>` with an address on the bridge. */
  host(name: string): NetHost {
    if (this.hosts.has(name)) throw new Error(`NetLab: host ${name} exists`);
    const index = this.#next++;
    const ns = `llmgw-${process.pid}-${name}`;
    const outside = `${this.#tag}v${index}`;
    const addr = `${this.#subnet}.${index}`;
    run('ip', ['netns', 'add', ns]);
    const host: NetHost = { name, ns, addr, prefix: ['ip', 'netns', 'exec', ns], link: outside };
    // Known to teardown from here on, so a step below that fails leaves no namespace behind.
    this.hosts.set(name, host);
    this.#faults.set(name, { isolated: false, cutFrom: new Set(), lossPercent: 0 });
    run('ip', ['link', 'add', outside, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    run('ip', ['link', 'set', outside, 'master', this.#bridge, 'up']);
    run('ip', ['-n', ns, 'addr', 'add', `${addr}/24`, 'dev', 'eth0']);
    run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    return host;
  }

  /** Drops every packet between `a` and `b`, both ways, in `a`'s namespace: neither side sees an error. */
  partition(a: NetHost, b: NetHost): void {
    this.#faults.get(a.name)!.cutFrom.add(b.addr);
    this.#apply(a);
  }

  /** Drops every packet `host` sends or receives on its link: it vanishes from the network (its own loopback still works). */
  isolate(host: NetHost): void {
    this.#faults.get(host.name)!.isolated = true;
    this.#apply(host);
  }

  /** Drops `percent` of the packets `host` sends and of those it receives, at random; 0 = none. */
  loss(host: NetHost, percent: number): void {
    this.#faults.get(host.name)!.lossPercent = percent;
    this.#apply(host);
  }

  /** Undoes every partition, isolation and loss of `host`. */
  heal(host: NetHost): void {
    this.#faults.set(host.name, { isolated: false, cutFrom: new Set(), lossPercent: 0 });
    this.#apply(host);
  }

  /**
   * A path to `target` (host:port) that adds `delayMs` each way. With netem,
   * the delay is put on both ends of `from`'s link (so it delays everything
   * `from` exchanges) and the path is the target itself;
   * without it, a relay in the root namespace on the bridge holds each chunk
   * for the delay, and the path is the relay's address. Returns the host:port
   * to use.
   */
  async delayedPath(from: NetHost, target: string, delayMs: number): Promise<string> {
    if (NETNS.netem) {
      // netem delays what leaves an interface: both ends of the host's link, for both directions.
      run('ip', [
        'netns',
        'exec',
        from.ns,
        'tc',
        'qdisc',
        'replace',
        'dev',
        'eth0',
        'root',
        'netem',
        'delay',
        `${delayMs}ms`,
      ]);
      run('tc', ['qdisc', 'replace', 'dev', from.link, 'root', 'netem', 'delay', `${delayMs}ms`]);
      return target;
    }
    const relay = await TcpRelay.start(this.gateway, target, delayMs);
    this.#relays.push(relay);
    return relay.address;
  }

  /** A plain TCP forward from the bridge to `target` (a service on the root namespace's loopback, such as Postgres). */
  async forward(target: string): Promise<string> {
    const relay = await TcpRelay.start(this.gateway, target, 0);
    this.#relays.push(relay);
    return relay.address;
  }

  /** Removes every namespace, link and relay this lab made; safe to call twice and after a failure. */
  async teardown(): Promise<void> {
    await Promise.all(this.#relays.map((r) => r.close()));
    for (const host of this.hosts.values()) {
      // Deleting a namespace removes the pair too, but only once the last process in it has gone; deleted here at once.
      quietly('ip', ['link', 'del', host.link]);
      quietly('ip', ['netns', 'del', host.ns]);
    }
    quietly('ip', ['link', 'del', this.#bridge]);
    this.hosts.clear();
  }

  #apply(host: NetHost): void {
    const f = this.#faults.get(host.name)!;
    const input: string[] = [];
    const output: string[] = [];
    if (f.isolated) {
      input.push('iifname "eth0" drop');
      output.push('oifname "eth0" drop');
    }
    for (const peer of f.cutFrom) {
      input.push(`ip saddr ${peer} drop`);
      output.push(`ip daddr ${peer} drop`);
    }
    if (f.lossPercent > 0) {
      input.push(`iifname "eth0" numgen random mod 100 < ${f.lossPercent} drop`);
      output.push(`oifname "eth0" numgen random mod 100 < ${f.lossPercent} drop`);
    }
    // Replaced in one transaction, so no packet slips through between the old rules and the new.
    const chain = (name: 'input' | 'output', rules: string[]) =>
      `  chain ${name} { type filter hook ${name} priority 0; policy accept;${rules.map((r) => ` ${r};`).join('')} }`;
    const script = [
      'table inet llmgw {}',
      'delete table inet llmgw',
      'table inet llmgw {',
      chain('input', input),
      chain('output', output),
      '}',
      '',
    ].join('\n');
    run('ip', ['netns', 'exec', host.ns, 'nft', '-f', '-'], script);
  }
}

/** A TCP relay that holds every chunk for `delayMs` before passing it on, each way; 0 = a plain forward. */
export class TcpRelay {
  readonly #open = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly address: string,
  ) {}

  static async start(host: string, target: string, delayMs: number): Promise<TcpRelay> {
    const at = target.lastIndexOf(':');
    const targetHost = target.slice(0, at);
    const targetPort = Number(target.slice(at + 1));
    let relay: TcpRelay | null = null;
    const server = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      relay!.#open.add(client).add(upstream);
      const end = () => {
        client.destroy();
        upstream.destroy();
        relay!.#open.delete(client);
        relay!.#open.delete(upstream);
      };
      const pass = (from: Socket, to: Socket) => {
        // Equal delays fire in the order they were set, so the byte stream keeps its order.
        from.on('data', (chunk: Buffer) =>
          delayMs > 0 ? setTimeout(() => to.destroyed || to.write(chunk), delayMs) : to.write(chunk),
        );
        from.on('end', () => (delayMs > 0 ? setTimeout(() => to.end(), delayMs) : to.end()));
      };
      pass(client, upstream);
      pass(upstream, client);
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, resolve));
    relay = new TcpRelay(server, `${host}:${(server.address() as { port: number }).port}`);
    return relay;
  }

  async close(): Promise<void> {
    for (const s of this.#open) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
