// Who may be a node: `nodes rm`, `nodes approve` and `join-token create|ls`.
// Apart from write.ts because these change the fleet's membership (who holds
// a node id), not where work runs, and the token's secret is printed once.
import type { JoinTokenView } from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';

export async function removeNode(
  ctx: CtlContext,
  id: string,
  options: { yes: boolean; force: boolean },
): Promise<number> {
  const n = (await ctx.client.nodes()).find((x) => x.id === id);
  if (!n) {
    ctx.warn(`no node "${id}"; \`llmgw ctl nodes\` lists them`);
    return EXIT.failed;
  }
  if (ctx.interactive && !options.yes) {
    const what = n.replicas ? `its ${n.replicas} replica(s) will be replaced elsewhere; ` : '';
    const ok = await ctx.confirm(
      `remove node ${id} (${n.liveness})? ${what}its credential stops working and its id is free to join again [y/N] `,
    );
    if (!ok) {
      ctx.warn(`node ${id} was not removed`);
      return EXIT.failed;
    }
  }
  const r = await ctx.client.removeNode(id, { force: options.force });
  if (ctx.json) ctx.out.json(r);
  else ctx.out.line(`removed node ${r.removed}: ${r.note}`);
  return EXIT.ok;
}

export async function approveNode(ctx: CtlContext, id: string): Promise<number> {
  const r = await ctx.client.approveNode(id);
  if (ctx.json) ctx.out.json(r);
  else ctx.out.line(`node ${r.approved} is approved${r.hardware ? ` with ${r.hardware}` : ''}: it takes replicas`);
  return EXIT.ok;
}

export async function createJoinToken(ctx: CtlContext, node: string, expires: string | undefined): Promise<number> {
  const t = await ctx.client.createJoinToken({ node, ...(expires === undefined ? {} : { expires }) });
  if (ctx.json) {
    ctx.out.json(t);
    return EXIT.ok;
  }
  ctx.out.line(`created join token ${t.id} for node ${t.node}, single use, expires ${t.expires_at}`);
  ctx.out.line(`token: ${t.token}`);
  ctx.out.line(`start the agent with: llmgw agent --node-id ${t.node} --join-token-file <file holding the token> …`);
  ctx.out.line(
    ctx.out.c.yellow(
      'the token is shown this once; llmgw keeps only its hash. It may replace the credential of a live node with that id.',
    ),
  );
  return EXIT.ok;
}

export async function listJoinTokens(ctx: CtlContext): Promise<number> {
  const tokens: JoinTokenView[] = await ctx.client.joinTokens();
  if (ctx.json) {
    ctx.out.json(tokens);
    return EXIT.ok;
  }
  if (tokens.length === 0) {
    ctx.out.line('no per-node join token yet: `llmgw ctl join-token create --node ID` makes one');
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['ID', 'NODE', 'STATUS', 'EXPIRES', 'USED', 'CREATED BY'],
      tokens.map((t) => [t.id, t.node, t.status, t.expires_at, t.used_at ?? '-', t.created_by]),
    ),
  );
  return EXIT.ok;
}
