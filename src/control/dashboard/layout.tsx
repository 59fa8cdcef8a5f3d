// The page around every dashboard view: navigation, styles, logout, and the
// few lines of script that refresh the panels. The script is an enhancement:
// it fetches the same URL with ?partial=1 and swaps the panels in; with
// scripts off a <noscript> meta refresh does the same job, coarser.
import type { ComponentChildren, VNode } from 'preact';
import { render } from 'preact-render-to-string';
import { CsrfField, type PageContext } from './components.js';

export const NAV: ReadonlyArray<readonly [string, string]> = [
  ['/', 'Overview'],
  ['/nodes', 'Nodes'],
  ['/models', 'Models'],
  ['/replicas', 'Replicas'],
  ['/traffic', 'Traffic'],
  ['/weights', 'Weights'],
  ['/requests', 'Requests'],
  ['/batches', 'Batches'],
  ['/audit', 'Audit'],
  ['/teams', 'Teams'],
  ['/budgets', 'Budgets'],
  ['/spend', 'Spend'],
  ['/people', 'People'],
];

const STYLE = `
:root{font-family:system-ui,sans-serif;font-size:14px;color:#1f2328;background:#f6f8fa}
body{margin:0}header{background:#24292f;color:#fff;display:flex;align-items:center;gap:1.5em;padding:.5em 1em}
header a{color:#d0d7de;text-decoration:none}header a.current{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff}header form{margin-left:auto}
main{padding:1em;max-width:1400px}
h1{font-size:1.4em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:0 0 .5em}
.panel{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:.8em 1em;margin-bottom:1em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #eaeef2;vertical-align:top}
th{font-weight:600;color:#57606a;font-size:.9em}.details th{width:14em}
.unknown{color:#8c959f}.empty{color:#57606a;font-style:italic}
.state{padding:0 .4em;border-radius:4px;font-size:.9em}.state.ok{background:#dafbe1}.state.warn{background:#fff8c5}.state.bad{background:#ffebe9}
.bar{display:inline-flex;align-items:center;gap:.4em}.bar-track{display:inline-block;width:90px;height:8px;background:#eaeef2;border-radius:4px;overflow:hidden}
.bar-fill{display:block;height:100%;background:#2da44e}.bar-fill.hot{background:#cf222e}
.attention li{color:#9a6700}.error{color:#cf222e}
form.inline{display:inline}button{font:inherit;margin-right:.3em;cursor:pointer}
.cards{display:flex;gap:1em;flex-wrap:wrap;margin-bottom:1em}.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:.6em 1em;min-width:10em}
.card .n{font-size:1.6em;font-weight:600}.mono{font-family:ui-monospace,monospace;font-size:.9em;word-break:break-all}
.legend{margin-right:1em}.swatch{display:inline-block;width:10px;height:10px}
.notice{background:#ddf4ff;border:1px solid #54aeff;padding:.5em 1em;border-radius:6px;margin-bottom:1em}
.problem{background:#ffebe9;border:1px solid #ff8182;padding:.5em 1em;border-radius:6px;margin-bottom:1em}
`;

// Swaps #panels with the same page rendered with ?partial=1. Stops on a
// redirect (the session ended: go to the login page) and never while the
// person is typing in or pressing something inside the panels.
const REFRESH_SCRIPT = `(function(){var m=document.getElementById('panels');if(!m||!m.dataset.refreshMs)return;var ms=+m.dataset.refreshMs;
function tick(){var a=document.activeElement;if(a&&a!==document.body&&m.contains(a)){setTimeout(tick,ms);return}
var u=new URL(location.href);u.searchParams.set('partial','1');
fetch(u,{credentials:'same-origin'}).then(function(r){if(r.redirected){location.href='/login';return null}return r.ok?r.text():null})
.then(function(t){if(t!==null){m.innerHTML=t}setTimeout(tick,ms)},function(){setTimeout(tick,ms)})}
setTimeout(tick,ms)})();`;

export interface LayoutProps {
  title: string;
  ctx: PageContext | null;
  /** Which nav entry is current, by its path. */
  section?: string;
  /** Refresh the panels this often, ms; null = a page that must not change under the reader (a confirmation, a form). */
  refreshMs: number | null;
  /** The CSP nonce that lets the refresh script run. */
  nonce: string;
  notice?: string;
  children: ComponentChildren;
}

export function Layout({ title, ctx, section, refreshMs, nonce, notice, children }: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · llmgw`}</title>
        <style dangerouslySetInnerHTML={{ __html: STYLE }} />
        {refreshMs !== null && (
          <noscript>
            <meta http-equiv="refresh" content={String(Math.max(5, Math.round((refreshMs * 2) / 1000)))} />
          </noscript>
        )}
      </head>
      <body>
        <header>
          <span class="brand">llmgw</span>
          {ctx &&
            NAV.map(([href, label]) => (
              <a href={href} class={section === href ? 'current' : undefined}>
                {label}
              </a>
            ))}
          {ctx?.person && (
            <span class="person" id="signed-in-as">
              {ctx.person.name} ({ctx.person.role})
            </span>
          )}
          {ctx && (
            <form method="post" action="/logout">
              <CsrfField ctx={ctx} />
              <button type="submit">Log out</button>
            </form>
          )}
        </header>
        <main>
          <h1>{title}</h1>
          {notice && <p class="notice">{notice}</p>}
          <div id="panels" data-refresh-ms={refreshMs === null ? undefined : String(refreshMs)}>
            {children}
          </div>
        </main>
        {refreshMs !== null && <script nonce={nonce} dangerouslySetInnerHTML={{ __html: REFRESH_SCRIPT }} />}
      </body>
    </html>
  );
}

/** A whole page as an HTML document. */
export function renderDocument(page: VNode): string {
  return `<!doctype html>${render(page)}`;
}

/** Only the panels, for the refresh script. */
export function renderFragment(panels: VNode): string {
  return render(panels);
}
