// The login form and the page for anything a person must read and act on
// (a refused form, a node that does not exist). The login page never shows
// what was typed: a wrong token is "wrong", not echoed.
import { Panel } from '../components.js';

export function LoginPage({
  problem,
  open,
  next,
  sso,
}: {
  problem?: string;
  open: boolean;
  next?: string;
  /** A company sign-in (OpenID Connect) is configured: offer it first. */
  sso?: boolean;
}) {
  return (
    <Panel title="Log in">
      {sso && (
        <p>
          <a id="sso" href={`/login/oidc${next ? `?next=${encodeURIComponent(next)}` : ''}`}>
            Sign in with your company account
          </a>
        </p>
      )}
      {problem && (
        <p class="problem" id="login-problem">
          {problem}
        </p>
      )}
      <form method="post" action="/login">
        {next && <input type="hidden" name="next" value={next} />}
        {open ? (
          <p>This control plane needs no admin token (its admin address is loopback only).</p>
        ) : (
          <p>
            <label>
              Admin token or your own{' '}
              <input type="password" name="token" autocomplete="current-password" required autofocus />
            </label>
          </p>
        )}
        <button type="submit">Log in</button>
      </form>
    </Panel>
  );
}

export function MessagePage({ message, back }: { message: string; back?: string }) {
  return (
    <>
      <p class="problem" id="message">
        {message}
      </p>
      <p>
        <a href={back ?? '/'}>Back</a>
      </p>
    </>
  );
}
