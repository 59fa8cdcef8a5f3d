// The changing commands: cordon, uncordon, drain (and following a drain),
// models add and rm, and weights --collect. Each is a separate verb from the
// reads, takes exact names, and asks first where it removes something and a
// person is at the terminal (--yes for scripts).
import { SingleBar } from 'cli-progress';
import { AdminApiError, type ModelDefinition, type ReplicaView } from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';
import { readModelFile } from './model-file.js';
import { bytesOrUnknown } from './render.js';

export async function setNodeState(ctx: CtlContext, id: string, verb: 'cordon' | 'uncordon'): Promise<number> {
  const r = await ctx.client.setNodeState(id, verb);
  if (ctx.json) ctx.out.json(r);
  else
    ctx.out.line(
      verb === 'cordon'
        ? `node ${r.id} is ${ctx.out.state(r.state)}: it takes no new replicas; the ones it runs keep serving`
        : `node ${r.id} is ${ctx.out.state(r.state)}: it takes new replicas again`,
    );
  return EXIT.ok;
}

export interface DrainOptions {
  wait: boolean;
  /** How long --wait waits, ms; absent = until done or Ctrl-C. */
  timeoutMs?: number;
  /** How often --wait asks, ms. */
  pollMs?: number;
}

export async function drain(ctx: CtlContext, id: string, options: DrainOptions): Promise<number> {
  const r = await ctx.client.drain(id);
  if (!options.wait) {
    if (ctx.json) ctx.out.json(r);
    else
      ctx.out.line(
        `node ${r.id} is ${ctx.out.state(r.state)}: its replicas move off as their replacements become ready; \`llmgw ctl drain ${id} --wait\` follows it`,
      );
    return EXIT.ok;
  }
  if (!ctx.json) ctx.out.line(`node ${r.id} is ${ctx.out.state(r.state)}`);
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  const bar =
    ctx.progressStream && !ctx.json
      ? new SingleBar({
          stream: ctx.progressStream,
          format: `draining ${id} [{bar}] {value}/{total} off | waiting for {waiting}`,
          barsize: 20,
          hideCursor: true,
          clearOnComplete: true,
        })
      : undefined;
  let total = 0;
  let lastWaiting = '';
  const seenAttention = new Set<string>();
  try {
    for (;;) {
      const [reps, ns] = await Promise.all([ctx.client.replicas(), ctx.client.nodes()]);
      const remaining = remainingOn(reps, id);
      total = Math.max(total, remaining.length);
      const waiting = remaining.map((x) => `${x.id} (${x.model}, ${x.state})`).join(', ');
      if (remaining.length === 0) {
        bar?.update(total, { waiting: 'done' });
        bar?.stop();
        if (ctx.json) ctx.out.json({ id, state: r.state, drained: true });
        else ctx.out.line(`node ${id} is drained: no replica runs there now`);
        return EXIT.ok;
      }
      if (bar) {
        // One line at the terminal's width: the first, then a count.
        const short =
          remaining
            .slice(0, 1)
            .map((x) => `${x.id} (${x.state})`)
            .join(', ') + (remaining.length > 1 ? ` and ${remaining.length - 1} more` : '');
        if (!bar.isActive) bar.start(total, 0, { waiting: short });
        bar.setTotal(total);
        bar.update(total - remaining.length, { waiting: short });
      } else if (waiting !== lastWaiting && !ctx.json) {
        ctx.out.line(`waiting for ${remaining.length} replica(s) on ${id} to move off: ${waiting}`);
      }
      lastWaiting = waiting;
      // A drain the reconciler cannot finish says why on the node; say it once, where the operator is looking.
      for (const a of ns.find((n) => n.id === id)?.drain_blocked ?? []) {
        if (!seenAttention.has(a)) {
          seenAttention.add(a);
          if (bar) ctx.warn(`\n${a}`);
          else ctx.out.line(`  ${ctx.out.c.yellow('!')} ${a}`);
        }
      }
      if (Date.now() >= deadline) {
        bar?.stop();
        ctx.warn(`node ${id} still runs ${remaining.length} replica(s) after waiting: ${waiting}; it keeps draining`);
        return EXIT.failed;
      }
      if (!(await ctx.pause(options.pollMs ?? 1000))) {
        bar?.stop();
        ctx.warn(`stopped waiting; node ${id} keeps draining (${remaining.length} replica(s) left)`);
        return EXIT.failed;
      }
    }
  } finally {
    if (bar?.isActive) bar.stop();
  }
}

/** Replicas with a shard on the node that has not stopped: what a drain waits for. */
export function remainingOn(reps: readonly ReplicaView[], nodeId: string): ReplicaView[] {
  return reps.filter((r) => r.shards.some((s) => s.node === nodeId && s.state !== 'stopped'));
}

export interface AddOptions {
  dryRun: boolean;
  force: boolean;
}

export async function addModels(ctx: CtlContext, file: string, options: AddOptions): Promise<number> {
  const defs = readModelFile(file);
  if (options.dryRun) return planModels(ctx, file, defs);
  const results: Array<{ name: string; added?: string; error?: string; status?: number }> = [];
  let failed = false;
  let noFit = false;
  for (const d of defs) {
    try {
      const r = await ctx.client.addModel(d, { force: options.force });
      results.push({ name: d.name, added: r.added });
      if (!ctx.json) ctx.out.line(`added ${r.added}`);
    } catch (err) {
      if (!(err instanceof AdminApiError)) throw err;
      results.push({ name: d.name, error: err.serverMessage, status: err.status });
      if (err.kind === 'placement_no_fit') noFit = true;
      else failed = true;
      ctx.warn(`model ${d.name} was not added: ${err.message}`);
      if (err.kind === 'placement_no_fit') ctx.warn(`(with ctl: \`llmgw ctl models add ${file} --force\`)`);
    }
  }
  if (ctx.json) ctx.out.json(results);
  const added = results.filter((r) => r.added).length;
  if (added < defs.length && defs.length > 1) ctx.warn(`added ${added} of ${defs.length} model(s) from ${file}`);
  return failed ? EXIT.failed : noFit ? EXIT.noFit : EXIT.ok;
}

/**
 * `models add --dry-run`: the control plane plans the models on the fleet as
 * it is now (nothing is added) and this prints where each replica would run,
 * or why it could not be placed. Exit 3 when any model would be short of its
 * wanted replicas.
 */
async function planModels(ctx: CtlContext, file: string, defs: ModelDefinition[]): Promise<number> {
  const plan = await ctx.client.planModels(defs);
  const short = plan.models.filter((m) => m.placed.length < m.wanted);
  if (ctx.json) {
    ctx.out.json(plan);
    return short.length ? EXIT.noFit : EXIT.ok;
  }
  ctx.out.line(
    `dry run: nothing was added. Where ${defs.length} model(s) from ${file} would run on the fleet as it is now:`,
  );
  for (const m of plan.models) {
    ctx.out.line();
    const ok = m.placed.length >= m.wanted;
    ctx.out.line(
      `${ctx.out.heading(m.name)}: ${ok ? ctx.out.c.green(`${m.placed.length}/${m.wanted} replica(s) placed`) : ctx.out.c.red(`${m.placed.length}/${m.wanted} replica(s) placed`)}`,
    );
    if (m.placed.length) {
      ctx.out.line(
        ctx.out.table(
          ['REPLICA', 'PROFILE', 'POOL', 'SHARD', 'NODE', 'GPUS'],
          m.placed.flatMap((r, i) =>
            r.shards.map((sh) => [
              `#${i + 1}`,
              r.profile,
              r.pool ?? '-',
              String(sh.rank),
              sh.node,
              sh.gpus.length ? sh.gpus.join(',') : 'none (CPU)',
            ]),
          ),
        ),
      );
    }
    if (m.wanted === 0) ctx.out.line('  scaling.min is 0: no replica starts until a request arrives');
    if (m.explain) ctx.out.line(`  ${m.explain.replace(/\n/g, '\n  ')}`);
  }
  if (short.length)
    ctx.warn(`${short.length} model(s) could not be fully placed: ${short.map((m) => m.name).join(', ')}`);
  return short.length ? EXIT.noFit : EXIT.ok;
}

export async function removeModel(ctx: CtlContext, name: string, options: { yes: boolean }): Promise<number> {
  const ms = await ctx.client.models();
  const m = ms.find((x) => x.name === name);
  if (!m) {
    const owner = ms.find((x) => x.aliases?.includes(name));
    ctx.warn(
      owner
        ? `"${name}" is an alias of ${owner.name}; models rm takes the model's exact name`
        : `no model named "${name}"; \`llmgw ctl models\` lists them`,
    );
    return EXIT.failed;
  }
  if (ctx.interactive && !options.yes) {
    const ok = await ctx.confirm(`remove model ${name}? its ${m.total_replicas} replica(s) will stop [y/N] `);
    if (!ok) {
      ctx.warn(`model ${name} was not removed`);
      return EXIT.failed;
    }
  }
  const r = await ctx.client.removeModel(name);
  if (ctx.json) ctx.out.json(r);
  else ctx.out.line(`removed ${r.removed}`);
  return EXIT.ok;
}

export async function collect(ctx: CtlContext, options: { node?: string; yes: boolean }): Promise<number> {
  const filter = options.node ? { node: options.node } : {};
  if (ctx.interactive && !options.yes) {
    // The control plane recomputes the orphans when asked; this list is what a person agrees to, shown first.
    const o = await ctx.client.orphans(filter);
    if (o.nodes.length === 0) {
      ctx.out.line(`no weights that no model wants${options.node ? ` on ${options.node}` : ''}: nothing to collect`);
      return EXIT.ok;
    }
    for (const n of o.nodes)
      for (const e of n.entries) ctx.out.line(`  ${n.node}  ${e.path}  ${bytesOrUnknown(e.size_bytes)}`);
    if (
      !(await ctx.confirm(`ask ${o.nodes.length} node(s) to remove these (${bytesOrUnknown(o.total_bytes)})? [y/N] `))
    ) {
      ctx.warn('nothing was collected');
      return EXIT.failed;
    }
  }
  const s = await ctx.client.collect(filter);
  if (ctx.json) {
    ctx.out.json(s);
  } else if (s.nodes.length === 0) {
    ctx.out.line(`no weights that no model wants${options.node ? ` on ${options.node}` : ''}: nothing to collect`);
  } else {
    for (const n of s.nodes) {
      const unsized = n.asked.filter((a) => a.size_bytes === undefined).length;
      // asked_bytes sums only the sizes nodes reported: a sum of some is a lower bound, a sum of none is unknown.
      const size =
        unsized === 0
          ? bytesOrUnknown(n.asked_bytes)
          : unsized === n.asked.length
            ? 'size unknown'
            : `${bytesOrUnknown(n.asked_bytes)} or more`;
      const asked = `node ${n.node}: asked to remove ${n.asked.length} (${size})`;
      if (n.unreachable) {
        ctx.out.line(`${asked}, ${ctx.out.c.red('not reachable')}: ${n.unreachable}`);
        continue;
      }
      const refused = n.refused.length ? `: ${[...new Set(n.refused.map((x) => x.reason))].join('; ')}` : '';
      ctx.out.line(`${asked}, removed ${n.removed.length}, refused ${n.refused.length}${refused}`);
    }
    ctx.out.line(
      `freed ${bytesOrUnknown(s.bytes_freed)}: removed ${s.removed}, refused ${s.refused}, ${s.unreachable} node(s) unreachable`,
    );
  }
  if (s.unreachable > 0) {
    ctx.warn(`${s.unreachable} node(s) could not be asked; their weights are untouched`);
    return EXIT.failed;
  }
  return EXIT.ok;
}
