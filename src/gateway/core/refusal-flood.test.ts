// A key hammering past its rate limit, through the real router and its
// request log. Guards against (#34) its refusals, one per request, pushing
// every answered request out of the log `ctl request ID` and the dashboard
// read, while its latest refusal stays findable by the id the client quotes.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, listen, model, simReplica } from '../../../test/support/gateway-router.js';
import { hashKey, type ApiKeyRecord } from '../ports/index.js';
import { RequestLog } from './request-log.js';

afterEach(closeAll);

function key(secret: string, requestsPerMinute: number | null): ApiKeyRecord {
  return {
    id: `key_${secret}`,
    name: secret,
    prefix: secret.slice(0, 12),
    hash: hashKey(secret),
    allowedModels: null,
    requestsPerMinute,
    tokensPerMinute: null,
    expiresAtMs: null,
    createdAtMs: 0,
    createdBy: 't',
    revokedAtMs: null,
  };
}

async function post(url: string, secret: string, id: string): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe('the request log while a key hammers its rate limit', () => {
  it('keeps the answered requests of others, and the latest refusals by id', async () => {
    const alpha = model({ name: 'alpha' });
    // Room for 4 requests taken: 40 refusals in one shared ring would have pushed all of them out.
    const requestLog = new RequestLog(4, { perKeyAndReason: 5 });
    const l = await listen([alpha], { requestLog }, { alpha: [await simReplica(alpha)] });
    await l.keys.create(key('sk-llmgw-calm-0001', null));
    await l.keys.create(key('sk-llmgw-hamr-0001', 1));
    for (const id of ['calm-1', 'calm-2', 'calm-3']) expect(await post(l.url, 'sk-llmgw-calm-0001', id)).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) statuses.push(await post(l.url, 'sk-llmgw-hamr-0001', `hammer-${i}`));
    expect(statuses.filter((s) => s === 429).length, 'the limit refused all but the first').toBe(39);
    for (const id of ['calm-1', 'calm-2', 'calm-3'])
      expect(requestLog.get(id)?.status, `${id} is still in the log`).toBe(200);
    expect(requestLog.get('hammer-39'), 'the latest refusal says which limit').toMatchObject({
      status: 429,
      admission: { outcome: 'limited', limit: 'requests per minute' },
    });
    expect(requestLog.get('hammer-30'), 'older refusals of the same key and limit are dropped').toBeUndefined();
  });
});
