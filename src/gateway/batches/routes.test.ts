// The Files API's limits on the client listener. Guards against an upload
// past files_max_size being read whole or refused in another shape than
// OpenAI's (a client branches on error.code), and against a file reaching
// the store without its key.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, harness, model } from '../../../test/support/gateway-router.js';
import type { FilesAndBatches } from '../ports/batches.js';

afterEach(closeAll);

function service(uploads: string[]): FilesAndBatches {
  const none = () => Promise.reject(new Error('not used'));
  return {
    fileMaxBytes: 1000,
    uploadFile: async (caller, file) => {
      uploads.push(`${caller.keyId}:${file.bytes.length}`);
      return { id: 'file-1', object: 'file' };
    },
    listFiles: none,
    getFile: none,
    fileContent: none,
    deleteFile: none,
    createBatch: none,
    getBatch: none,
    listBatches: none,
    cancelBatch: none,
  };
}

async function upload(url: string, secret: string | null, bytes: number): Promise<Response> {
  const form = new FormData();
  form.set('purpose', 'batch');
  form.set('file', new Blob([Buffer.alloc(bytes, 0x61)]), 'in.jsonl');
  return fetch(`${url}/v1/files`, {
    method: 'POST',
    headers: secret ? { authorization: `Bearer ${secret}` } : {},
    body: form,
  });
}

describe('POST /v1/files', () => {
  it('takes a file within files_max_size as the key, and refuses one past it with 413 in OpenAI’s shape', async () => {
    const uploads: string[] = [];
    const h = await harness([model({ name: 'alpha' })], { batches: service(uploads) });
    expect((await upload(h.url, h.secret, 500)).status).toBe(200);
    expect(uploads).toHaveLength(1);
    const big = await upload(h.url, h.secret, 200_000);
    expect(big.status).toBe(413);
    const body = (await big.json()) as { error: { message: string; type: string } };
    expect(body.error.message).toEqual(expect.any(String));
    expect(uploads, 'the refused file never reached the service').toHaveLength(1);
    expect((await upload(h.url, null, 10)).status, 'no key, no upload').toBe(401);
  });
});

describe('the routes’ declared schemas', () => {
  function recording(seen: unknown[]): FilesAndBatches {
    const none = () => Promise.reject(new Error('not used'));
    return {
      ...service([]),
      listFiles: async (_caller, q) => {
        seen.push(q);
        return { object: 'list', data: [] };
      },
      createBatch: async (_caller, body) => {
        seen.push(body);
        return { id: 'batch-1', object: 'batch' };
      },
      listBatches: none,
    };
  }

  async function post(url: string, secret: string | null, body: string): Promise<Response> {
    return fetch(`${url}/v1/batches`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(secret ? { authorization: `Bearer ${secret}` } : {}) },
      body,
    });
  }

  type OpenAiError = { error: { message: string; param: string | null; code: string | null; type: string } };

  it('hands POST /v1/batches a checked body, and refuses a misfit with 400 naming its field', async () => {
    const seen: unknown[] = [];
    const h = await harness([model({ name: 'alpha' })], { batches: recording(seen) });
    const good = { input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: '24h' };
    // A field OpenAI has and llmgw does not use is dropped, not refused; a byte-order mark is not JSON's.
    const ok = await post(h.url, h.secret, `\uFEFF${JSON.stringify({ ...good, output_expires_after: null })}`);
    expect(ok.status).toBe(200);
    expect(seen).toEqual([good]);

    const cases: [string, string | null, RegExp][] = [
      [JSON.stringify({ ...good, endpoint: '/v1/completions' }), 'endpoint', /endpoint: want one of \/v1\/chat/],
      [JSON.stringify({ ...good, input_file_id: undefined }), 'input_file_id', /input_file_id: is required/],
      [JSON.stringify({ ...good, metadata: { a: 1 } }), 'metadata', /metadata\.a: /],
      [JSON.stringify([good]), null, /send a JSON object/],
      ['', null, /send a JSON object/],
    ];
    for (const [body, param, message] of cases) {
      const res = await post(h.url, h.secret, body);
      expect(res.status, body).toBe(400);
      const e = (await res.json()) as OpenAiError;
      expect(e.error.message, body).toMatch(message);
      expect(e.error.param, body).toBe(param);
      expect(e.error.type).toBe('invalid_request_error');
    }
    const broken = await post(h.url, h.secret, '{"input_file_id": ');
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as OpenAiError).error.message).toMatch(/not valid JSON/);
    expect(seen, 'no refused body reached the service').toHaveLength(1);
  });

  it('checks the key before the body: without one, a misfit body is 401, not 400', async () => {
    const seen: unknown[] = [];
    const h = await harness([model({ name: 'alpha' })], { batches: recording(seen) });
    expect((await post(h.url, null, '[]')).status).toBe(401);
    expect((await post(h.url, 'sk-wrong', '{')).status).toBe(401);
    expect(seen).toHaveLength(0);
  });

  it('reads GET /v1/files’ query through its schema: defaults filled, a bad limit or order refused', async () => {
    const seen: unknown[] = [];
    const h = await harness([model({ name: 'alpha' })], { batches: recording(seen) });
    const get = (query: string) =>
      fetch(`${h.url}/v1/files${query}`, { headers: { authorization: `Bearer ${h.secret}` } });
    expect((await get('')).status).toBe(200);
    expect((await get('?limit=5&order=asc&purpose=batch&after=file-9')).status).toBe(200);
    expect(seen).toEqual([
      { limit: 20, order: 'desc' },
      { limit: 5, order: 'asc', purpose: 'batch', after: 'file-9' },
    ]);
    for (const [query, param] of [
      ['?limit=0', 'limit'],
      ['?limit=2.5', 'limit'],
      ['?limit=many', 'limit'],
      ['?limit=10001', 'limit'],
      ['?order=up', 'order'],
    ] as const) {
      const res = await get(query);
      expect(res.status, query).toBe(400);
      const e = (await res.json()) as OpenAiError;
      expect(e.error.param, query).toBe(param);
      expect(e.error.message, query).toMatch(new RegExp(`^${param}: `));
    }
    expect(seen).toHaveLength(2);
  });
});
