// `llmgw ctl people` and `llmgw ctl login`/`whoami`: named admin identities
// with roles, and how a person gets a token of their own. Apart from
// access.ts (API keys for clients) because these are the admin listener's
// own credentials, and index.ts only hands them their commands.
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { AdminApiError, AdminClient, type NewPerson, type PersonView } from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';
import { deviceLogin } from './device-login.js';

type Run = <A extends unknown[]>(fn: (ctx: CtlContext, ...args: A) => Promise<number>) => (...args: A) => Promise<void>;

const ROLES = ['admin', 'operator', 'viewer', 'team-admin'];

export function registerPeopleCommands(program: Command, run: Run): void {
  const people = program
    .command('people')
    .description('people with roles and their own tokens: ls, create, rotate, expire, rm');
  people
    .command('ls', { isDefault: true })
    .description('every person, their role and tokens; never a secret')
    .action(run((ctx) => listPeople(ctx)));
  people
    .command('create')
    .argument('<name>', 'a login or e-mail address')
    .requiredOption('--role <role>', `one of ${ROLES.join(', ')}`)
    .option('--teams <names>', "a team-admin's teams (comma-separated)")
    .option('--expires <duration>', 'how long the token lives (30d, 12h); default 90d')
    .description('make a person; their token is printed this once')
    .action(
      run((ctx, name: string, o: { role: string; teams?: string; expires?: string }) =>
        createPerson(ctx, {
          name,
          role: o.role as NewPerson['role'],
          ...(o.teams ? { teams: o.teams.split(',').map((t) => t.trim()) } : {}),
          ...(o.expires ? { expires_in: o.expires } : {}),
        }),
      ),
    );
  people
    .command('rotate')
    .argument('<name>')
    .option('--expires <duration>', 'how long the new token lives; default 90d')
    .description('a new token for the person; every other token of theirs stops working now')
    .action(
      run(async (ctx, name: string, o: { expires?: string }) => {
        const t = await ctx.client.rotatePerson(name, o.expires ? { expires_in: o.expires } : {});
        return printToken(ctx, t, `rotated ${name}'s token (${t.prefix}…, until ${t.expires_at})`, t.token);
      }),
    );
  people
    .command('expire')
    .argument('<name>')
    .description('end every token of the person now; the person stays (rotate gives a new one)')
    .action(
      run(async (ctx, name: string) => {
        const r = await ctx.client.expirePerson(name);
        if (ctx.json) ctx.out.json(r);
        else ctx.out.line(`expired ${r.tokens_expired} token${r.tokens_expired === 1 ? '' : 's'} of ${name}`);
        return EXIT.ok;
      }),
    );
  people
    .command('rm')
    .argument('<name>')
    .option('-y, --yes', 'do not ask (for scripts)')
    .description('delete the person, their tokens and dashboard sessions')
    .action(
      run(async (ctx, name: string, o: { yes?: boolean }) => {
        if (ctx.interactive && !o.yes && !(await ctx.confirm(`delete ${name} and end their tokens and sessions?`)))
          return EXIT.failed;
        const r = await ctx.client.deletePerson(name);
        if (ctx.json) ctx.out.json(r);
        else ctx.out.line(`deleted ${name}`);
        return EXIT.ok;
      }),
    );

  program
    .command('whoami')
    .description('who this token is: the person, role and permissions')
    .action(
      run(async (ctx) => {
        const me = await ctx.client.whoami();
        if (ctx.json) ctx.out.json(me);
        else {
          ctx.out.line(
            `${me.person ?? me.identity} (role ${me.role}${me.teams.length ? `, teams ${me.teams.join(', ')}` : ''})`,
          );
          ctx.out.line(`may: ${me.permissions.join(', ')}`);
        }
        return EXIT.ok;
      }),
    );

  program
    .command('login')
    .description(
      "get a token of your own through the identity provider: a code to approve in any browser (the device flow), or the dashboard's token page",
    )
    .option('--paste', "use the dashboard's token page and paste its token here, even where the device flow is offered")
    .action(run((ctx, o: { paste?: boolean }) => login(ctx, !!o.paste)));
}

async function listPeople(ctx: CtlContext): Promise<number> {
  const { people } = await ctx.client.people();
  if (ctx.json) {
    ctx.out.json({ people });
    return EXIT.ok;
  }
  if (people.length === 0) {
    ctx.out.line('nobody yet: `llmgw ctl people create NAME --role viewer` makes one');
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['NAME', 'ROLE', 'TEAMS', 'SOURCE', 'TOKENS', 'LAST EXPIRES', 'CREATED BY'],
      people.map((p) => [
        p.name,
        p.role,
        p.teams.join(', ') || '-',
        p.source,
        tokensText(p),
        p.tokens
          .map((t) => t.expires_at)
          .sort()
          .at(-1) ?? '-',
        p.created_by,
      ]),
    ),
  );
  return EXIT.ok;
}

function tokensText(p: PersonView): string {
  const live = p.tokens.filter((t) => t.state === 'active');
  return live.length === 0 ? 'none live' : live.map((t) => `${t.prefix}…`).join(' ');
}

async function createPerson(ctx: CtlContext, person: NewPerson): Promise<number> {
  const p = await ctx.client.createPerson(person);
  return printToken(ctx, p, `created ${p.name} (role ${p.role})`, p.token);
}

function printToken(ctx: CtlContext, answer: object, said: string, token: string): number {
  if (ctx.json) {
    ctx.out.json(answer);
    return EXIT.ok;
  }
  ctx.out.line(said);
  ctx.out.line(`token: ${token}`);
  ctx.out.line(ctx.out.c.yellow('the token is shown this once: give it to the person; llmgw keeps only its hash'));
  return EXIT.ok;
}

/**
 * The person signs in on the dashboard's token page, which shows a token of
 * their own; they paste it here, ctl checks it with whoami and says how to
 * use it. Without SSO there is no sign-in to send them to: an admin makes
 * them a token with `people create`.
 */
async function login(ctx: CtlContext, paste: boolean): Promise<number> {
  // Without single sign-on the control plane serves no /api/v1/login: 401 without a token, 404 with one.
  const info = await ctx.client.loginInfo().catch((err: unknown) => {
    if (err instanceof AdminApiError && (err.status === 401 || err.status === 404)) return null;
    throw err;
  });
  if (!info?.sso || info.token_page === null) {
    ctx.warn(
      'this control plane has no single sign-on configured; ask an admin for a token (`llmgw ctl people create`)',
    );
    return EXIT.failed;
  }
  if (info.device_authorization && !paste) {
    const done = await deviceLogin(ctx);
    if (done !== null) return done;
  }
  ctx.warn(`open ${ctx.client.baseUrl}${info.token_page} in a browser, sign in, and paste the token it shows here:`);
  const rl = createInterface({ input: process.stdin, terminal: false });
  let token = '';
  try {
    for await (const line of rl) {
      token = line.trim();
      if (token) break;
    }
  } finally {
    rl.close();
  }
  if (!token) {
    ctx.warn('no token was pasted');
    return EXIT.failed;
  }
  const me = await new AdminClient({ baseUrl: ctx.client.baseUrl, token }).whoami();
  if (ctx.json) {
    ctx.out.json({ ...me, token });
    return EXIT.ok;
  }
  ctx.out.line(`signed in as ${me.person ?? me.identity} (role ${me.role})`);
  ctx.out.line(`export LLMGW_ADMIN_TOKEN=${token}`);
  return EXIT.ok;
}
