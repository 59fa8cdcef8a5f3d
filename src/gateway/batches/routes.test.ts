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
