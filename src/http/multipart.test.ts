import { describe, expect, it } from 'vitest';
import { formBoundary, readForm, withFormField } from './multipart.js';

/** A form as a client library sends it: the bytes and the content type with its boundary. */
async function form(parts: [string, string | Blob, string?][]): Promise<{ raw: Buffer; type: string }> {
  const f = new FormData();
  for (const [name, value, filename] of parts) {
    if (typeof value === 'string') f.append(name, value);
    else f.append(name, value, filename);
  }
  const req = new Request('http://x/', { method: 'POST', body: f });
  return { raw: Buffer.from(await req.arrayBuffer()), type: req.headers.get('content-type')! };
}

describe('multipart forms', () => {
  it('reads text fields and files, and keeps file bytes only when asked', async () => {
    const audio = Buffer.alloc(3000, 7);
    const { raw, type } = await form([['model', 'whisper'], ['file', new Blob([audio]), 'talk.wav'], ['language', 'en']]);
    const read = await readForm(raw, type);
    expect(read.fields).toEqual({ model: 'whisper', language: 'en' });
    expect(read.files.get('file')).toEqual({ filename: 'talk.wav', sizeBytes: 3000, bytes: null });
    const kept = await readForm(raw, type, { keepFiles: true });
    expect(kept.files.get('file')?.bytes?.equals(audio), 'the file as sent').toBe(true);
  });

  it('refuses a body without a boundary or cut short, saying what to send', async () => {
    await expect(readForm(Buffer.from('x'), 'multipart/form-data')).rejects.toMatchObject({ code: 'LLMGW_BAD_REQUEST', message: expect.stringContaining('with its boundary') });
    const { raw, type } = await form([['model', 'whisper'], ['file', new Blob(['abc']), 'a.wav']]);
    await expect(readForm(raw.subarray(0, raw.length - 20), type)).rejects.toMatchObject({ message: expect.stringContaining('send a complete multipart/form-data body') });
  });

  it('replaces one field and leaves every other byte as it was', async () => {
    const { raw, type } = await form([['file', new Blob(['model=x']), 'model.wav'], ['model', 'alias'], ['prompt', 'hi']]);
    expect(formBoundary(type)).toMatch(/^-*\w/);
    const renamed = withFormField(raw, type, 'model', 'canonical/name')!;
    const read = await readForm(renamed, type, { keepFiles: true });
    expect(read.fields).toEqual({ model: 'canonical/name', prompt: 'hi' });
    expect(read.files.get('file')?.bytes?.toString(), 'a file named like the field is not touched').toBe('model=x');
    expect(renamed.length - raw.length).toBe('canonical/name'.length - 'alias'.length);
    expect(withFormField(raw, type, 'language', 'en'), 'no such field').toBeNull();
  });
});
