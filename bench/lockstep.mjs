// What bench/builds.mjs and bench/floors.mjs share: clients that send to
// several servers in turn, request by request, so each is loaded at the
// same moments and a stall of the machine falls on all of them alike.
// CPU per request of one process on this VM moves by up to 40% between
// consecutive seconds; taken in turn, two identical routers read 0.98 to
// 1.04 of each other by round.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { Pool } from 'undici';

/**
 * `count` chat completions with `body` to each of `targets` ({ url, key }),
 * from `connections` clients that each send to every target in turn (which
 * goes first rotates by client). Resolves to how many answers were not 200.
 */
export async function inTurn(targets, count, { connections, body }) {
  const pools = targets.map((t) => new Pool(t.url, { connections }));
  let left = count;
  let errors = 0;
  await Promise.all(
    Array.from({ length: connections }, async (_, c) => {
      while (left-- > 0)
        for (let k = 0; k < targets.length; k++) {
          const i = (c + k) % targets.length;
          const res = await pools[i].request({
            path: '/v1/chat/completions',
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${targets[i].key}` },
            body,
          });
          await res.body.text();
          if (res.statusCode !== 200) errors++;
        }
    }),
  );
  await Promise.all(pools.map((p) => p.close()));
  return errors;
}
