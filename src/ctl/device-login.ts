// `llmgw ctl login` through the device flow: the control plane starts a
// device sign-in with the identity provider, ctl prints the verification URL
// and the code for the person to approve in any browser, and polls the
// control plane until it hands over the person's new token. Apart from
// people.ts so the poll loop and its words read alone.
import { setTimeout as sleep } from 'node:timers/promises';
import { AdminApiError, AdminClient } from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';

/** Signs in through the device flow; null = the provider refused to start one (the caller falls back to the token page). */
export async function deviceLogin(ctx: CtlContext, pollMs?: number): Promise<number | null> {
  let start;
  try {
    start = await ctx.client.startDeviceLogin();
  } catch (err) {
    if (err instanceof AdminApiError && err.status === 502) {
      ctx.warn(`${err.message}`);
      return null;
    }
    throw err;
  }
  ctx.warn(`open ${start.verification_uri} in a browser and enter the code ${start.user_code}`);
  if (start.verification_uri_complete) ctx.warn(`(or open ${start.verification_uri_complete}, which has it filled in)`);
  ctx.warn(`waiting for the sign-in; the code expires in ${Math.round(start.expires_in / 60)} minutes`);
  const every = pollMs ?? Math.max(1, start.interval) * 1000;
  const until = Date.now() + start.expires_in * 1000;
  for (;;) {
    await sleep(every);
    const r = await ctx.client.pollDeviceLogin(start.handle);
    if (r.state === 'done') {
      const me = await new AdminClient({ baseUrl: ctx.client.baseUrl, token: r.token }).whoami();
      if (ctx.json) {
        ctx.out.json({ ...me, token: r.token, expires_at: r.expires_at });
        return EXIT.ok;
      }
      ctx.out.line(`signed in as ${me.person ?? me.identity} (role ${me.role}); the token works until ${r.expires_at}`);
      ctx.out.line(`export LLMGW_ADMIN_TOKEN=${r.token}`);
      return EXIT.ok;
    }
    if (Date.now() > until + every) {
      ctx.warn('the code expired before anyone signed in with it; run llmgw ctl login again');
      return EXIT.failed;
    }
  }
}
