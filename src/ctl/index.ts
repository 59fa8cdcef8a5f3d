// `llmgw ctl`: the operator's command line over the admin API. Separate from
// the control plane because it reaches it only the way any operator does, over
// HTTP through src/api (a lint rule keeps src/control out of here), so what it
// shows is what the API serves. main.ts hands it the arguments after `ctl`;
// it returns the exit code (0 ok, 1 the request failed, 2 usage, 3 placement
// impossible) and never calls process.exit, so tests can run it in process.
import { createInterface } from 'node:readline/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command, CommanderError, Option } from 'commander';
import type { Dispatcher } from 'undici';
import { AdminApiError, AdminApiUnreachableError, AdminClient } from '../api/index.js';
import { type Connection, ConnectionConfigError, resolveConnection, type ConnectionFlags } from './connection.js';
import { dispatcherForCa } from '../tls/index.js';
import { type CtlContext, EXIT } from './context.js';
import { ModelFileError } from './model-file.js';
import * as access from './access.js';
import * as membership from './membership.js';
import * as money from './money.js';
import * as read from './read.js';
import * as shadows from './shadows.js';
import * as batches from './batches.js';
import { cleanForTerminal, errorText, Output } from './render.js';
import * as why from './why-operations.js';
import * as write from './write.js';
import { registerPeopleCommands } from './people.js';
import { budgetChangeFrom, setBudget, type BudgetChangeFlags } from './budget-change.js';

type Stdout = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

export interface CtlIo {
  stdout: Stdout;
  stderr: NodeJS.WritableStream;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Subscribes to Ctrl-C while a command waits (--watch, drain --wait); returns the unsubscribe. Default: SIGINT. */
  onInterrupt: (handler: () => void) => () => void;
  /** For tests: the HTTP dispatcher the admin client uses; absent = undici's global one. */
  dispatcher?: Dispatcher;
}

/** How often --watch re-renders, ms. */
const WATCH_INTERVAL_MS = 2000;

export async function runCtl(argv: string[], overrides: Partial<CtlIo> = {}): Promise<number> {
  const io: CtlIo = {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
    onInterrupt: (handler) => {
      process.on('SIGINT', handler);
      return () => process.off('SIGINT', handler);
    },
    ...overrides,
  };
  // Colour on stderr follows stdout's terminal, as the messages' own colours do (render.ts).
  const errOut = new Output((s) => io.stderr.write(s), { tty: io.stdout.isTTY === true, color: !io.env.NO_COLOR });
  const warn = (line: string) => errOut.line(line);
  let code: number = EXIT.ok;
  const release: { current?: () => void } = {};

  /** Builds the context from the global flags and runs one command, turning typed errors into a sentence and a code. */
  const run =
    <A extends unknown[]>(fn: (ctx: CtlContext, ...args: A) => Promise<number>) =>
    async (...args: A): Promise<void> => {
      const cmd = args[args.length - 1] as Command;
      const flags = cmd.optsWithGlobals<GlobalFlags>();
      let conn: Connection | undefined;
      try {
        conn = resolveConnection(flags, io.env, io.cwd);
        const ctx = contextFor(io, conn, flags, warn, release);
        code = await fn(ctx, ...(args.slice(0, -1) as A));
      } catch (err) {
        code = explainFailure(err, warn, conn);
      }
    };

  // Set before any subcommand exists: commander copies these into each one as it is created,
  // and a subcommand without them would call process.exit itself.
  const root = new Command('llmgw ctl').exitOverride().configureOutput({
    writeOut: (s) => io.stdout.write(s),
    writeErr: (s) => io.stderr.write(s),
  });
  const program = buildProgram(root, run);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    throw err;
  } finally {
    release.current?.();
  }
  return code;
}

interface GlobalFlags extends ConnectionFlags {
  output: 'table' | 'json';
}

type Runner = <A extends unknown[]>(
  fn: (ctx: CtlContext, ...args: A) => Promise<number>,
) => (...args: A) => Promise<void>;

function buildProgram(root: Command, run: Runner): Command {
  const program = root
    .description('operate an llmgw fleet through the admin API')
    .addOption(
      new Option(
        '--admin-url <url>',
        'the admin API, e.g. http://127.0.0.1:8081 (or LLMGW_ADMIN_URL; default: a local `llmgw up`, then http://127.0.0.1:8081)',
      ),
    )
    .addOption(new Option('--token <token>', "the admin token (or LLMGW_ADMIN_TOKEN; default: a local `llmgw up`'s)"))
    .addOption(
      new Option('--ca <file>', "PEM CA an https admin URL must chain to (or LLMGW_CA; default: the system's CAs)"),
    )
    .addOption(
      new Option(
        '--data-dir <dir>',
        'where a local `llmgw up` keeps control.json and admin-token (or LLMGW_DATA_DIR)',
      ).default(undefined, './.llmgw'),
    )
    .addOption(new Option('--actor <who>', 'who is acting, for the audit log (default: user@host)'))
    .addOption(
      new Option('-o, --output <format>', "table, or json: the API's own JSON")
        .choices(['table', 'json'])
        .default('table'),
    )
    .showHelpAfterError('(llmgw ctl --help lists the commands)')
    .showSuggestionAfterError();

  const watchable = (cmd: Command) => cmd.option('-w, --watch', 're-render every 2 s until Ctrl-C');
  type WatchOpts = { watch?: boolean };

  watchable(program.command('summary').description('the fleet in a few lines, and what needs a person')).action(
    run((ctx, o: WatchOpts) => watchOr(ctx, o, () => read.summary(ctx))),
  );
  const nodes = watchable(
    program
      .command('nodes')
      .description(
        'the nodes, a page at a time: state, GPUs, RAM, disk, replicas; `nodes rm` and `nodes approve` change who is one',
      )
      .option(
        '--state <words>',
        'only nodes in these states, comma-separated: ready, cordoned, draining (admin), up, stale, lost (liveness), pending (approval)',
      )
      .option(
        '--label <key=value>',
        'only nodes with this label (a key alone: any value); repeat for several, all must match',
        (v: string, all: string[] | undefined) => [...(all ?? []), v],
      )
      .option('-q, --search <text>', 'only nodes whose id, hostname or GPU class contains this')
      .option('--limit <n>', `at most this many, 1 to 1000 (default ${NODES_PAGE})`)
      .option('--after <node>', 'start after this node id (the last one of the previous page)')
      .option('--all', 'every node that matches, in one answer'),
  ).action(run((ctx, o: WatchOpts & NodesFlags) => watchOr(ctx, o, () => read.nodes(ctx, nodesOptions(o)))));
  nodes
    .command('rm')
    .argument('<node>', 'node id')
    .description('remove a node: its credential stops working and its id is free to join again')
    .option(
      '--force',
      "remove a live node that still runs replicas (they are replaced elsewhere, as a lost node's are); without it, drain first",
    )
    .option('-y, --yes', 'do not ask (for scripts)')
    .action(
      run((ctx, id: string, o: { yes?: boolean; force?: boolean }) =>
        membership.removeNode(ctx, id, { yes: !!o.yes, force: !!o.force }),
      ),
    );
  nodes
    .command('approve')
    .argument('<node>', 'node id')
    .description('let a pending node take replicas (join_approval: manual), accepting the GPUs it reports now')
    .action(run((ctx, id: string) => membership.approveNode(ctx, id)));

  const joinTokens = program
    .command('join-token')
    .description('per-node join tokens: single use, expiring, for one node id');
  joinTokens
    .command('create')
    .requiredOption('--node <id>', 'the only node id the token admits')
    .option('--expires <duration>', 'how long it is valid, e.g. 30m or 1h (default 1h, at most 7d)')
    .description('make a token; its secret is printed this once')
    .action(run((ctx, o: { node: string; expires?: string }) => membership.createJoinToken(ctx, o.node, o.expires)));
  joinTokens
    .command('ls')
    .description('per-node join tokens with their state; never a secret')
    .action(run((ctx) => membership.listJoinTokens(ctx)));
  watchable(
    program
      .command('node')
      .argument('<node>', 'node id')
      .description('one node: GPUs with health, disk, weights, replicas'),
  ).action(run((ctx, id: string, o: WatchOpts) => watchOr(ctx, o, () => read.node(ctx, id))));

  const models = watchable(
    program
      .command('models')
      .description('the catalog: models with ready replicas; `models add` and `models rm` change it'),
  ).action(run((ctx, o: WatchOpts) => watchOr(ctx, o, () => read.models(ctx))));
  models
    .command('add')
    .argument('<file>', 'YAML or JSON: one model, a list, or {models: [...]}')
    .description('add models to the catalog')
    .option(
      '--dry-run',
      'plan the file on the fleet as it is now and print where each replica would run; adds nothing (`plan FILE` also says why each node fits or not)',
    )
    .option('--force', 'add even if no known node could ever run it (a fleet still joining)')
    .action(
      run((ctx, file: string, o: { dryRun?: boolean; force?: boolean }) =>
        write.addModels(ctx, file, { dryRun: !!o.dryRun, force: !!o.force }),
      ),
    );
  models
    .command('rm')
    .argument('<name>', "the model's exact name (not an alias)")
    .description('remove a model from the catalog; its replicas stop')
    .option('-y, --yes', 'do not ask (for scripts)')
    .action(run((ctx, name: string, o: { yes?: boolean }) => write.removeModel(ctx, name, { yes: !!o.yes })));

  watchable(
    program
      .command('model')
      .argument('<name>', 'model name or alias')
      .description('one model: profiles, replicas, and why it is not placed'),
  ).action(run((ctx, name: string, o: WatchOpts) => watchOr(ctx, o, () => read.model(ctx, name))));
  watchable(
    program.command('replicas').description('replicas with their shards').option('--model <name>', "only this model's"),
  ).action(run((ctx, o: WatchOpts & { model?: string }) => watchOr(ctx, o, () => read.replicas(ctx, o.model))));
  program
    .command('explain')
    .argument('<model>', 'model name or alias')
    .description('why a model is not placed; exits 3 when no node can run it')
    .action(run((ctx, name: string) => read.explain(ctx, name)));

  program
    .command('cordon')
    .argument('<node>', 'node id')
    .description('take no new replicas on a node; the ones it runs keep serving')
    .action(run((ctx, id: string) => write.setNodeState(ctx, id, 'cordon')));
  program
    .command('uncordon')
    .argument('<node>', 'node id')
    .description('let a cordoned or draining node take replicas again')
    .action(run((ctx, id: string) => write.setNodeState(ctx, id, 'uncordon')));
  program
    .command('drain')
    .argument('<node>', 'node id')
    .description('move every replica off a node (each keeps serving until its replacement is ready)')
    .option('--wait', 'follow the drain until no replica runs on the node')
    .option('--timeout <duration>', 'with --wait: give up waiting after this long, e.g. 10m (the drain goes on)')
    .action(
      run((ctx, id: string, o: { wait?: boolean; timeout?: string }) => {
        const timeoutMs = o.timeout === undefined ? undefined : parseDuration(o.timeout);
        if (timeoutMs === null)
          throw new UsageError(`--timeout: "${o.timeout}" is not a duration; want e.g. 90s or 10m`);
        return write.drain(ctx, id, { wait: !!o.wait, ...(timeoutMs === undefined ? {} : { timeoutMs }) });
      }),
    );

  watchable(
    program
      .command('weights')
      .description('weights on nodes that no model wants (orphans); --collect asks the nodes to remove them')
      .option('--node <node>', 'only this node')
      .option('--collect', 'ask the nodes to remove their orphans (computed afresh by the control plane)')
      .option('-y, --yes', 'with --collect: do not ask (for scripts)'),
  ).action(
    run((ctx, o: WatchOpts & { node?: string; collect?: boolean; yes?: boolean }) => {
      if (o.collect && o.watch)
        throw new UsageError('--collect and --watch do not go together: collect is a change, not a listing');
      if (o.collect) return write.collect(ctx, { ...(o.node ? { node: o.node } : {}), yes: !!o.yes });
      return watchOr(ctx, o, () => read.weights(ctx, o.node));
    }),
  );

  registerPeopleCommands(program, run);

  const keys = program.command('keys').description('API keys for the client listener: create, ls, rm');
  keys
    .command('create')
    .argument('<name>', 'who or what the key is for')
    .description('make a key; its secret is printed this once')
    .option('--models <names>', 'only these models (comma-separated); default every model')
    .option('--rpm <n>', 'requests per minute; default no limit')
    .option('--tpm <n>', 'tokens per minute; default no limit')
    .option('--expires <when>', 'a duration from now (30d, 12h, 90m) or a time (2027-01-31T00:00:00Z); default never')
    .option('--team <name>', "the team whose limits cap the key's; default `default`")
    .option('--priority <class>', 'interactive or batch: its class when a model queues requests; default interactive')
    .action(
      run((ctx, name: string, o: access.KeyCreateOptions) => {
        let key;
        try {
          key = access.newKeyFrom(name, o, Date.now());
        } catch (err) {
          if (err instanceof access.KeyFlagError) throw new UsageError(err.message);
          throw err;
        }
        if (o.team !== undefined) key.team = o.team;
        return access.createKey(ctx, key);
      }),
    );
  keys
    .command('ls')
    .description('every key, with its limits and state; never a secret')
    .action(run((ctx) => access.listKeys(ctx)));
  keys
    .command('rm')
    .argument('<id>', "the key's exact id (from keys ls)")
    .description('revoke a key: clients using it get 401 at once')
    .option('-y, --yes', 'do not ask (for scripts)')
    .action(run((ctx, id: string, o: { yes?: boolean }) => access.revokeKey(ctx, id, { yes: !!o.yes })));

  watchable(
    program
      .command('usage')
      .description('requests and tokens per key, model and endpoint')
      .option('--model <name>', 'only this model')
      .option(
        '--endpoint <name>',
        'only this endpoint (chat, completions, embeddings, rerank, score, transcriptions, tokenize, detokenize, messages, responses)',
      )
      .option('--by <what>', 'spend in US dollars per team, key or model (with what a million tokens cost per model)'),
  ).action(
    run((ctx, o: WatchOpts & { model?: string; endpoint?: string; by?: string }) => {
      if (o.by === undefined) return watchOr(ctx, o, () => access.usage(ctx, o));
      const by = o.by;
      if (by !== 'team' && by !== 'key' && by !== 'model')
        throw new UsageError(`--by: want team, key or model, not "${by}"`);
      return watchOr(ctx, o, () => money.spend(ctx, by));
    }),
  );

  const teams = program.command('teams').description('teams: every key is in one, whose limits cap its own');
  teams.action(run((ctx) => money.listTeams(ctx)));
  teams
    .command('ls')
    .description('every team, its limits and how many live keys it holds')
    .action(run((ctx) => money.listTeams(ctx)));
  const teamFlags = (c: Command) =>
    c
      .option('--models <names>', 'only these models (comma-separated; `all` = every model)')
      .option('--rpm <n>', "each key's ceiling in requests per minute (`none` = no ceiling)")
      .option('--tpm <n>', "each key's ceiling in tokens per minute (`none` = no ceiling)")
      .option('--weight <n>', "its share when a model queues requests: 2 = twice a team of 1's turns (default 1)");
  const teamLimits = (o: money.TeamFlags) => {
    try {
      return money.teamLimitsFrom(o);
    } catch (err) {
      if (err instanceof access.KeyFlagError) throw new UsageError(err.message);
      throw err;
    }
  };
  teamFlags(
    teams.command('create').argument('<name>', 'lower-case letters, digits, . _ -').description('make a team'),
  ).action(
    run((ctx, name: string, o: money.TeamFlags) => {
      const limits = teamLimits(o);
      return money.createTeam(ctx, {
        name,
        ...(limits.allowed_models ? { allowed_models: limits.allowed_models } : {}),
        ...(limits.requests_per_minute ? { requests_per_minute: limits.requests_per_minute } : {}),
        ...(limits.tokens_per_minute ? { tokens_per_minute: limits.tokens_per_minute } : {}),
        ...(limits.weight !== undefined ? { weight: limits.weight } : {}),
      });
    }),
  );
  teamFlags(
    teams.command('set').argument('<name>', "the team's name").description("change a team's limits; its keys follow"),
  ).action(run((ctx, name: string, o: money.TeamFlags) => money.setTeam(ctx, name, teamLimits(o))));
  teams
    .command('rm')
    .argument('<name>', "the team's exact name")
    .description('delete a team that holds no live key')
    .option('-y, --yes', 'do not ask (for scripts)')
    .action(run((ctx, name: string, o: { yes?: boolean }) => money.deleteTeam(ctx, name, { yes: !!o.yes })));

  const budgets = program
    .command('budgets')
    .description('token and money budgets per team or key, per day or month: ls, create, set, rm');
  budgets.action(run((ctx) => money.listBudgets(ctx)));
  budgets
    .command('ls')
    .description('every budget and what its period spent')
    .action(run((ctx) => money.listBudgets(ctx)));
  budgets
    .command('create')
    .description('a budget: hard (429 past it) unless --soft (an event and a metric at --alert-at)')
    .option('--team <name>', 'on this team (every key in it)')
    .option('--key <id>', 'on this key')
    .option('--tokens <n>', 'prompt and completion tokens')
    .option('--usd <amount>', "US dollars, at the models' prices")
    .option('--per <period>', 'day or month (UTC)')
    .option('--soft', 'only tell: an event and a metric, never a refusal')
    .option('--alert-at <fraction>', 'tell at this fraction of the amount; default 0.8 soft, 1 hard')
    .action(
      run((ctx, o: money.BudgetFlags) => {
        let budget;
        try {
          budget = money.newBudgetFrom(o);
        } catch (err) {
          if (err instanceof access.KeyFlagError) throw new UsageError(err.message);
          throw err;
        }
        return money.createBudget(ctx, budget);
      }),
    );
  budgets
    .command('set')
    .argument('<id>', "the budget's exact id (from budgets ls)")
    .description("change a budget's amount, enforcement or alert threshold; its period's spend stays")
    .option('--tokens <n>', 'the new amount, for a token budget')
    .option('--usd <amount>', 'the new amount, for a money budget')
    .option('--soft', 'only tell from now on: an event and a metric, never a refusal')
    .option('--hard', 'refuse with 429 past the amount from now on')
    .option('--alert-at <fraction>', 'tell at this fraction of the amount')
    .action(
      run((ctx, id: string, o: BudgetChangeFlags) => {
        let change;
        try {
          change = budgetChangeFrom(o);
        } catch (err) {
          if (err instanceof access.KeyFlagError) throw new UsageError(err.message);
          throw err;
        }
        return setBudget(ctx, id, change, o);
      }),
    );
  budgets
    .command('rm')
    .argument('<id>', "the budget's exact id (from budgets ls)")
    .description('delete a budget')
    .option('-y, --yes', 'do not ask (for scripts)')
    .action(run((ctx, id: string, o: { yes?: boolean }) => money.deleteBudget(ctx, id, { yes: !!o.yes })));

  program
    .command('logs')
    .argument('<replica>', 'replica id (from `replicas`)')
    .description("an engine's log, fetched from the node that runs it")
    .option('--shard <rank>', 'the shard of a multi-node replica; default 0')
    .option('-n, --lines <n>', 'how many of the newest lines (default 100, at most 10000)')
    .option('-f, --follow', 'keep printing new lines until Ctrl-C')
    .action(
      run((ctx, replica: string, o: { shard?: string; lines?: string; follow?: boolean }) => {
        const shard = o.shard === undefined ? undefined : Number(o.shard);
        if (shard !== undefined && (!Number.isInteger(shard) || shard < 0))
          throw new UsageError(`--shard: "${o.shard}" is not a shard rank (0, 1, …)`);
        // Absent: the control plane's default, the one place it is kept.
        const lines = o.lines === undefined ? undefined : Number(o.lines);
        if (lines !== undefined && (!Number.isInteger(lines) || lines < 1 || lines > 10_000))
          throw new UsageError(`--lines: "${o.lines}" is not a whole number from 1 to 10000`);
        return access.logs(ctx, replica, {
          ...(shard === undefined ? {} : { shard }),
          ...(lines === undefined ? {} : { lines }),
          follow: !!o.follow,
        });
      }),
    );

  program
    .command('events')
    .description('what the fleet did and why: scaling decisions, nodes joining and lost, drains, placement failures')
    .option('--model <name>', "only this model's")
    .option('--limit <n>', 'how many of the newest (default 100, at most 1000)')
    .option('-w, --watch', 'keep printing new events as they happen, until Ctrl-C')
    .action(
      run((ctx, o: { model?: string; limit?: string; watch?: boolean }) => {
        const limit = o.limit === undefined ? undefined : Number(o.limit);
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000))
          throw new UsageError(`--limit: "${o.limit}" is not a whole number from 1 to 1000`);
        return read.events(ctx, {
          ...(o.model ? { model: o.model } : {}),
          ...(limit === undefined ? {} : { limit }),
          follow: !!o.watch,
        });
      }),
    );

  // The operator's questions 5-8 (README "Asking why"): each answer names its cause with the numbers behind it.
  program
    .command('request')
    .argument('<id>', 'the x-request-id the router sent back')
    .description("which replica served a request and why it failed, from this control plane's request log")
    .action(run((ctx, id: string) => why.request(ctx, id)));
  program
    .command('requests')
    .description('recent requests with the replica that served each, or why none did')
    .option('--id <request-id>', 'only those that carried this x-request-id (a client may reuse one)')
    .option('--model <name>', "only this model's")
    .option('--status <code>', 'only those answered with this HTTP status')
    .option('--failed', 'only those that failed')
    .option('--limit <n>', 'how many of the newest (default 50, at most 1000)')
    .action(
      run((ctx, o: { id?: string; model?: string; status?: string; failed?: boolean; limit?: string }) => {
        const status = o.status === undefined ? undefined : Number(o.status);
        if (status !== undefined && (!Number.isInteger(status) || status < 100 || status > 599))
          throw new UsageError(`--status: "${o.status}" is not an HTTP status`);
        const limit = o.limit === undefined ? undefined : Number(o.limit);
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000))
          throw new UsageError(`--limit: "${o.limit}" is not a whole number from 1 to 1000`);
        return why.requests(ctx, {
          ...(o.id ? { id: o.id } : {}),
          ...(o.model ? { model: o.model } : {}),
          ...(status === undefined ? {} : { status }),
          failed: !!o.failed,
          ...(limit === undefined ? {} : { limit }),
        });
      }),
    );
  watchable(
    program
      .command('shadows')
      .description(
        "each shadowed model against its candidate: requests, errors, latency, tokens (this control plane's)",
      ),
  ).action(run((ctx, o: WatchOpts) => watchOr(ctx, o, () => shadows.shadows(ctx))));
  const batchCmd = watchable(
    program
      .command('batches')
      .argument('[id]', 'one batch, with what the pace says of each of its models')
      .description('batches: progress, rate and estimated finish; `batches cancel ID` stops one'),
  ).action(
    run((ctx, id: string | undefined, o: WatchOpts) =>
      watchOr(ctx, o, () => (id === undefined ? batches.listBatches(ctx) : batches.showBatch(ctx, id))),
    ),
  );
  batchCmd
    .command('cancel')
    .argument('<id>', "the batch's exact id (from ctl batches)")
    .description('cancel a batch: lines running finish, the rest are closed as cancelled')
    .option('-y, --yes', 'do not ask (for scripts)')
    .action(run((ctx, id: string, o: { yes?: boolean }) => batches.cancelBatch(ctx, id, { yes: !!o.yes })));
  program
    .command('disk')
    .argument('<node>', 'node id')
    .description("where a node's disk went: per filesystem, weights by model, orphans and other files")
    .action(run((ctx, node: string) => why.disk(ctx, node)));
  program
    .command('audit')
    .description('what changed and who did it: every admin write, newest last')
    .option('--since <when>', 'a duration back (30m, 12h, 7d) or a time (2026-12-04T10:00:00Z)')
    .option('--actor <who>', 'only this identity or label')
    .option('--action <action>', 'only this action (node.state), or a family (node.)')
    .option('--target <target>', 'only changes to this model, node or key')
    .option('--limit <n>', 'how many of the newest (default 100, at most 1000)')
    .action(
      run((ctx, o: { since?: string; actor?: string; action?: string; target?: string; limit?: string }) => {
        const limit = o.limit === undefined ? undefined : Number(o.limit);
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000))
          throw new UsageError(`--limit: "${o.limit}" is not a whole number from 1 to 1000`);
        const { limit: _l, ...filters } = o;
        return why.audit(ctx, { ...filters, ...(limit === undefined ? {} : { limit }) });
      }),
    );
  program
    .command('plan')
    .argument('<file>', 'YAML or JSON, as for `models add`')
    .description(
      'will these models fit, and where: per profile, the nodes that fit and why each other one does not; adds nothing; exits 3 when one would not be placed',
    )
    .action(run((ctx, file: string) => why.plan(ctx, file)));

  return program;
}

/** How many nodes `ctl nodes` shows without --limit or --all: a screenful or two, whatever the fleet's size. */
const NODES_PAGE = 100;

interface NodesFlags {
  state?: string;
  label?: string[];
  search?: string;
  limit?: string;
  after?: string;
  all?: boolean;
}

/** The flags of `ctl nodes` as the API's query; the server checks the words, this the numbers. */
function nodesOptions(o: NodesFlags): read.NodesOptions {
  if (o.all && o.limit !== undefined)
    throw new UsageError('--all and --limit do not go together: --all shows every node, --limit a page');
  const limit = o.limit === undefined ? NODES_PAGE : Number(o.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new UsageError(`--limit: "${o.limit}" is not a whole number from 1 to 1000 (--all shows every node)`);
  const state = (o.state ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    ...(state.length ? { state } : {}),
    ...(o.label?.length ? { labels: o.label } : {}),
    ...(o.search ? { q: o.search } : {}),
    ...(o.all ? {} : { limit }),
    ...(o.after ? { after: o.after } : {}),
  };
}

class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

function contextFor(
  io: CtlIo,
  conn: Connection,
  flags: GlobalFlags,
  warn: (line: string) => void,
  release: { current?: () => void },
): CtlContext {
  const tty = io.stdout.isTTY === true;
  const columns = () => (tty ? io.stdout.columns : Number(io.env.COLUMNS) || undefined);
  const out = new Output((s) => io.stdout.write(s), { tty, color: !io.env.NO_COLOR, width: columns });
  const dispatcher = io.dispatcher ?? dispatcherForCa(conn.ca);
  const json = flags.output === 'json';
  const client = forTerminal(
    new AdminClient({
      baseUrl: conn.adminUrl,
      token: conn.token,
      actor: conn.actor,
      ...(dispatcher ? { dispatcher } : {}),
    }),
    { cleanAnswers: !json },
  );
  // Ctrl-C is only ours once a command waits on purpose (--watch, drain --wait);
  // before that it ends the process as usual. Held until runCtl returns.
  const controller = new AbortController();
  const holdInterrupt = () => {
    if (!controller.signal.aborted && !release.current) release.current = io.onInterrupt(() => controller.abort());
  };
  const pause = async (ms: number): Promise<boolean> => {
    holdInterrupt();
    try {
      await sleep(ms, undefined, { signal: controller.signal });
      return true;
    } catch {
      return false;
    }
  };
  return {
    client,
    out,
    warn,
    json,
    interactive: io.stdin.isTTY === true,
    confirm: async (question) => {
      const rl = createInterface({ input: io.stdin, output: io.stderr });
      try {
        return /^y(es)?$/i.test((await rl.question(out.safe(question))).trim());
      } finally {
        rl.close();
      }
    },
    pause,
    holdInterrupt,
    ...(tty ? { progressStream: io.stdout } : {}),
  };
}

/**
 * The admin client as ctl uses it: every answer's strings cleaned for the
 * terminal (render.ts cleanForTerminal) before any command sees them, and
 * every error's message too, whatever the output format. Here, once, rather
 * than in each command: what nodes, engines and clients wrote reaches ctl
 * only through this client, so a new command prints it safely without
 * anyone remembering to. -o json keeps the answers as sent: JSON escapes
 * control characters itself.
 */
function forTerminal(client: AdminClient, options: { cleanAnswers: boolean }): AdminClient {
  const cleanError = (err: unknown): never => {
    if (err instanceof Error) err.message = errorText(err.message);
    throw err;
  };
  return new Proxy(client, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          // The target, not the proxy, as `this`: the client keeps its state in private fields.
          result = (value as (...a: unknown[]) => unknown).apply(target, args);
        } catch (err) {
          return cleanError(err);
        }
        if (!(result instanceof Promise)) return options.cleanAnswers ? cleanForTerminal(result) : result;
        return result.then((answer: unknown) => (options.cleanAnswers ? cleanForTerminal(answer) : answer), cleanError);
      };
    },
  });
}

/** Renders once, or every 2 s until Ctrl-C with --watch; a failed round is shown and the next one tried. */
async function watchOr(ctx: CtlContext, o: { watch?: boolean }, render: () => Promise<number>): Promise<number> {
  if (!o.watch) return render();
  // Ctrl-C during a render (not only between them) ends the watch with 0, not the process by the signal.
  ctx.holdInterrupt();
  for (;;) {
    ctx.out.clearScreen();
    if (!ctx.json)
      ctx.out.line(
        ctx.out.c.dim(
          `every ${WATCH_INTERVAL_MS / 1000}s, Ctrl-C to stop · ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`,
        ),
      );
    try {
      await render();
    } catch (err) {
      explainFailure(err, ctx.warn);
    }
    if (!ctx.out.tty && !ctx.json) ctx.out.line();
    if (!(await ctx.pause(WATCH_INTERVAL_MS))) return EXIT.ok;
  }
}

/** A typed failure as one sentence on stderr, and its exit code. */
function explainFailure(err: unknown, warn: (line: string) => void, conn?: Connection): number {
  if (err instanceof AdminApiUnreachableError) {
    warn(`llmgw ctl: ${conn ? unreachableMessage(err, conn) : err.message}`);
    return EXIT.failed;
  }
  if (err instanceof AdminApiError) {
    const hint = err.kind === 'unauthorized' ? ' (pass --token or set LLMGW_ADMIN_TOKEN)' : '';
    warn(`llmgw ctl: ${err.message}${hint}`);
    return err.kind === 'placement_no_fit' ? EXIT.noFit : EXIT.failed;
  }
  if (err instanceof ModelFileError || err instanceof ConnectionConfigError || err instanceof UsageError) {
    warn(`llmgw ctl: ${err.message}`);
    return EXIT.usage;
  }
  throw err;
}

/**
 * No answer, worded for where the URL came from: someone who ran `llmgw up`
 * elsewhere is told where ctl looked for it, not only about `llmgw control`.
 */
export function unreachableMessage(err: AdminApiUnreachableError, conn: Connection): string {
  const at = `cannot reach the admin API at ${err.baseUrl} (${err.detail})`;
  if (conn.source === 'default') {
    return (
      `${at}, \`llmgw control\`'s default address. No running \`llmgw up\` was found: ${conn.looked.join('; ')}. ` +
      'Start `llmgw up` or `llmgw control`, run ctl in the directory that holds .llmgw, or pass --data-dir or --admin-url (LLMGW_ADMIN_URL)'
    );
  }
  if (conn.source.endsWith('control.json')) {
    return `${at}, which ${conn.source} names: is the \`llmgw up\` or \`llmgw control\` that wrote it still running? Start it again, or pass --admin-url (LLMGW_ADMIN_URL)`;
  }
  return err.message;
}

/** "90s", "10m", "1h", "500ms"; null = not a duration. */
function parseDuration(s: string): number | null {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(s.trim());
  if (!m) return null;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
  return Number(m[1]) * unit;
}
