// Who may use the fleet and what they used: `keys create|ls|rm` and `usage`,
// and the engines' own words: `logs`. Apart from read.ts and write.ts because
// these face the router's clients and the engines rather than placement.
import type { KeyView, NewKey, UsageView } from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';

export interface KeyCreateOptions {
  models?: string;
  rpm?: string;
  tpm?: string;
  expires?: string;
  team?: string;
  priority?: string;
}

/** A flag value that is not what it should be: a usage error (exit 2) naming the flag. */
export class KeyFlagError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyFlagError';
  }
}

/** The request for `keys create`, from its flags; throws KeyFlagError saying which flag is wrong. */
export function newKeyFrom(name: string, o: KeyCreateOptions, nowMs: number): NewKey {
  const key: NewKey = { name };
  if (o.models !== undefined) {
    const models = o.models
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    if (models.length === 0) throw new KeyFlagError('--models: want one or more model names, comma-separated');
    key.allowed_models = models;
  }
  const perMinute = (flag: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new KeyFlagError(`${flag}: "${v}" is not a whole number of 1 or more`);
    return n;
  };
  const rpm = perMinute('--rpm', o.rpm);
  const tpm = perMinute('--tpm', o.tpm);
  if (rpm !== undefined) key.requests_per_minute = rpm;
  if (tpm !== undefined) key.tokens_per_minute = tpm;
  if (o.expires !== undefined) key.expires_at = expiryFrom(o.expires, nowMs);
  if (o.priority !== undefined) {
    if (o.priority !== 'interactive' && o.priority !== 'batch')
      throw new KeyFlagError(`--priority: want interactive or batch, not "${o.priority}"`);
    key.priority = o.priority;
  }
  return key;
}

/** "30d", "12h", "90m" from now, or an ISO 8601 time as it is. */
function expiryFrom(v: string, nowMs: number): string {
  const rel = /^(\d+)(m|h|d)$/.exec(v.trim());
  if (rel)
    return new Date(
      nowMs + Number(rel[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[rel[2] as 'm' | 'h' | 'd'],
    ).toISOString();
  if (!Number.isNaN(Date.parse(v))) return v;
  throw new KeyFlagError(
    `--expires: "${v}" is neither a duration like 30d, 12h or 90m nor a time like 2027-01-31T00:00:00Z`,
  );
}

export async function createKey(ctx: CtlContext, key: NewKey): Promise<number> {
  const k = await ctx.client.createKey(key);
  if (ctx.json) {
    ctx.out.json(k);
    return EXIT.ok;
  }
  ctx.out.line(`created key ${k.id} (${k.name}, ${k.prefix}…)`);
  ctx.out.line(`secret: ${k.secret}`);
  ctx.out.line(ctx.out.c.yellow('the secret is shown this once: store it now; llmgw keeps only its hash'));
  return EXIT.ok;
}

export async function listKeys(ctx: CtlContext): Promise<number> {
  const { keys } = await ctx.client.keys();
  if (ctx.json) {
    ctx.out.json({ keys });
    return EXIT.ok;
  }
  if (keys.length === 0) {
    ctx.out.line('no API key yet: `llmgw ctl keys create NAME` makes one');
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['ID', 'NAME', 'PREFIX', 'STATE', 'MODELS', 'REQ/MIN', 'TOK/MIN', 'PRIORITY', 'EXPIRES', 'CREATED BY'],
      keys.map((k) => [
        k.id,
        k.name,
        `${k.prefix}…`,
        keyState(ctx, k),
        k.allowed_models === null ? 'all' : k.allowed_models.join(', ') || 'none',
        k.requests_per_minute === null ? 'no limit' : String(k.requests_per_minute),
        k.tokens_per_minute === null ? 'no limit' : String(k.tokens_per_minute),
        k.priority ?? 'interactive',
        k.expires_at ?? 'never',
        k.created_by,
      ]),
    ),
  );
  return EXIT.ok;
}

function keyState(ctx: CtlContext, k: KeyView): string {
  if (k.state === 'active') return ctx.out.c.green('active');
  return ctx.out.c.red(k.state);
}

export async function revokeKey(ctx: CtlContext, id: string, options: { yes: boolean }): Promise<number> {
  const { keys } = await ctx.client.keys();
  const k = keys.find((x) => x.id === id);
  if (!k) {
    const byName = keys.filter((x) => x.name === id || x.prefix === id);
    ctx.warn(
      byName.length
        ? `keys rm takes a key's exact id, not its name or prefix; "${id}" matches ${byName.map((x) => x.id).join(', ')}`
        : `no key has the id "${id}"; \`llmgw ctl keys ls\` lists them`,
    );
    return EXIT.failed;
  }
  if (ctx.interactive && !options.yes) {
    const ok = await ctx.confirm(
      `revoke key ${k.id} (${k.name}, ${k.prefix}…)? clients using it get 401 at once [y/N] `,
    );
    if (!ok) {
      ctx.warn(`key ${k.id} was not revoked`);
      return EXIT.failed;
    }
  }
  const r = await ctx.client.revokeKey(id);
  if (ctx.json) ctx.out.json(r);
  else ctx.out.line(`revoked ${r.id}`);
  return EXIT.ok;
}

export async function usage(ctx: CtlContext, options: { model?: string; endpoint?: string }): Promise<number> {
  // The endpoint is filtered by the control plane, which refuses a name that is no endpoint (a typo never reads as "no usage").
  const [rows, { keys }] = await Promise.all([
    ctx.client.usage(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ctx.client.keys(),
  ]);
  const shown = rows.filter((r) => !options.model || r.model === options.model);
  if (ctx.json) {
    ctx.out.json(shown);
    return EXIT.ok;
  }
  if (shown.length === 0) {
    const what = [options.model && `for ${options.model}`, options.endpoint && `to ${options.endpoint}`]
      .filter(Boolean)
      .join(' ');
    ctx.out.line(what ? `no request ${what} has been counted yet` : 'no request has been counted yet');
    return EXIT.ok;
  }
  const byId = new Map(keys.map((k) => [k.id, k]));
  const keyCell = (r: UsageView) => {
    const k = byId.get(r.key_id);
    if (k) return `${k.name} (${k.prefix}…)`;
    return r.key_id === 'anonymous' ? 'no key (keys off)' : r.key_id;
  };
  ctx.out.line(
    ctx.out.table(
      ['KEY', 'MODEL', 'ENDPOINT', 'REQUESTS', 'ERRORS', 'PROMPT TOKENS', 'COMPLETION TOKENS'],
      shown.map((r) => [
        keyCell(r),
        r.model,
        r.endpoint,
        String(r.requests),
        r.errors ? ctx.out.c.red(String(r.errors)) : '0',
        String(r.prompt_tokens),
        String(r.completion_tokens),
      ]),
    ),
  );
  ctx.out.line(ctx.out.c.dim('counted since the store was made; the router writes its counts every few seconds'));
  return EXIT.ok;
}

/** How many lines `logs -f` asks for each time; a burst longer than this between two asks is shown cut. */
const FOLLOW_WINDOW = 1000;
const FOLLOW_INTERVAL_MS = 1000;

export async function logs(
  ctx: CtlContext,
  replica: string,
  /** `lines` absent: as many as the control plane sends by default. */
  options: { shard?: number; lines?: number; follow: boolean },
): Promise<number> {
  const first = await ctx.client.replicaLog(replica, {
    ...(options.shard === undefined ? {} : { shard: options.shard }),
    ...(options.lines === undefined ? {} : { lines: options.lines }),
  });
  if (ctx.json && !options.follow) {
    ctx.out.json(first);
    return EXIT.ok;
  }
  const print = (lines: readonly string[]) => {
    for (const l of lines) {
      if (ctx.json) ctx.out.jsonLine(l);
      else ctx.out.line(l);
    }
  };
  if (!ctx.json)
    ctx.warn(ctx.out.c.dim(`replica ${first.replica}, shard ${first.rank} (${first.shard}) on node ${first.node}`));
  print(first.lines);
  if (!options.follow) return EXIT.ok;
  // The node serves the newest lines, not a position in the file: each ask is
  // matched against what was printed and only what follows it is shown.
  let seen = first.lines.slice(-FOLLOW_WINDOW);
  while (await ctx.pause(FOLLOW_INTERVAL_MS)) {
    let next;
    try {
      next = await ctx.client.replicaLog(replica, {
        ...(options.shard === undefined ? {} : { shard: options.shard }),
        lines: FOLLOW_WINDOW,
      });
    } catch (err) {
      ctx.warn(`llmgw ctl logs: ${(err as Error).message}; trying again`);
      continue;
    }
    const fresh = newLines(seen, next.lines);
    print(fresh);
    seen = next.lines;
  }
  return EXIT.ok;
}

/**
 * The lines of `now` that come after what `before` ended with. Both are tails
 * of one growing log: the longest suffix of `before` that is a prefix of
 * `now`'s part that overlaps tells where the new part starts. No overlap
 * (more than a window written between two asks, or the log rotated) means
 * all of `now` is new. A run of identical lines that grows between two asks
 * is ambiguous and may be shown short.
 */
export function newLines(before: readonly string[], now: readonly string[]): string[] {
  if (before.length === 0) return [...now];
  for (let start = Math.max(0, before.length - now.length); start < before.length; start++) {
    const overlap = before.length - start;
    let match = true;
    for (let i = 0; i < overlap; i++) {
      if (before[start + i] !== now[i]) {
        match = false;
        break;
      }
    }
    if (match) return now.slice(overlap);
  }
  return [...now];
}
