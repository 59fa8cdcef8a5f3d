// A remote model's last probe in words for `ctl model`: whether it is in
// routing and, for a peer llmgw, its fleet's ready replicas and load as its
// capacity endpoint said them. Apart from read.ts so the wording is
// table-tested on its own.
import type { RemoteHealthView } from '../api/index.js';

/** "in routing; peer: 2 ready, 7 running, 3 waiting", or "out of routing: <why>". */
export function remoteText(r: RemoteHealthView): string {
  const peer =
    r.ready === undefined ? '' : `peer: ${r.ready} ready, ${r.running ?? 0} running, ${r.waiting ?? 0} waiting`;
  if (!r.healthy) return `out of routing: ${r.reason}${peer ? ` (${peer})` : ''}`;
  if (r.reason) return `in routing (${r.reason})${peer ? `; ${peer}` : ''}`;
  return `in routing${peer ? `; ${peer}` : ''}`;
}
