import { describe, expect, it } from 'vitest';
import { FORM_LIMITS, FormReader, formBoundary, readForm, withFormField } from './multipart.js';

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
    const { raw, type } = await form([
      ['model', 'whisper'],
      ['file', new Blob([audio]), 'talk.wav'],
      ['language', 'en'],
    ]);
    const read = await readForm(raw, type);
    expect(read.fields).toEqual({ model: 'whisper', language: 'en' });
    expect(read.files.get('file')).toEqual({ filename: 'talk.wav', sizeBytes: 3000, bytes: null });
    const kept = await readForm(raw, type, { keepFiles: true });
    expect(kept.files.get('file')?.bytes?.equals(audio), 'the file as sent').toBe(true);
  });

  it('refuses a body without a boundary or cut short, saying what to send', async () => {
    await expect(readForm(Buffer.from('x'), 'multipart/form-data')).rejects.toMatchObject({
      code: 'LLMGW_BAD_REQUEST',
      message: expect.stringContaining('with its boundary'),
    });
    const { raw, type } = await form([
      ['model', 'whisper'],
      ['file', new Blob(['abc']), 'a.wav'],
    ]);
    await expect(readForm(raw.subarray(0, raw.length - 20), type)).rejects.toMatchObject({
      message: expect.stringContaining('send a complete multipart/form-data body'),
    });
  });

  it('replaces one field and leaves every other byte as it was', async () => {
    const { raw, type } = await form([
      ['file', new Blob(['model=x']), 'model.wav'],
      ['model', 'alias'],
      ['prompt', 'hi'],
    ]);
    expect(formBoundary(type)).toMatch(/^-*\w/);
    const renamed = withFormField(raw, type, 'model', 'canonical/name')!;
    const read = await readForm(renamed, type, { keepFiles: true });
    expect(read.fields).toEqual({ model: 'canonical/name', prompt: 'hi' });
    expect(read.files.get('file')?.bytes?.toString(), 'a file named like the field is not touched').toBe('model=x');
    expect(renamed.length - raw.length).toBe('canonical/name'.length - 'alias'.length);
    expect(withFormField(raw, type, 'language', 'en'), 'no such field').toBeNull();
  });
});

/** A form written by hand: `parts` as [name, value, filename?], with a short boundary as an attacker would pick. */
function handForm(parts: [string, string, string?][]): { raw: Buffer; type: string } {
  const body = parts.map(
    ([name, value, filename]) =>
      `--x\r\ncontent-disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}\r\n\r\n${value}\r\n`,
  );
  return { raw: Buffer.from(`${body.join('')}--x--\r\n`), type: 'multipart/form-data; boundary=x' };
}

describe('multipart limits', () => {
  // Regression (issue #33): 200,000 one-byte fields and a 12 MB file, parsed whole in one call, held the control plane 5.7 s.
  it('takes 64 fields and refuses the 65th with a 413 naming the limit, as soon as it is seen', async () => {
    const fields = (n: number) => Array.from({ length: n }, (_, i): [string, string] => [`f${i}`, '1']);
    const at = handForm([...fields(64), ['file', 'abc', 'a.wav']]);
    expect(Object.keys((await readForm(at.raw, at.type)).fields)).toHaveLength(64);
    const field = Buffer.from('--x\r\ncontent-disposition: form-data; name="f"\r\n\r\n1\r\n');
    const over = {
      raw: Buffer.concat([Buffer.alloc(field.length * 200_000).fill(field), handForm([['file', 'abc', 'a.wav']]).raw]),
      type: at.type,
    };
    const reader = new FormReader(over.type);
    expect(reader.write(over.raw), 'refused within the first write').toBe(false);
    expect(reader.refusal).toMatchObject({
      code: 'LLMGW_BODY_TOO_LARGE',
      status: 413,
      message: expect.stringContaining(`more than ${FORM_LIMITS.fields} fields`),
    });
    expect(reader.refusal!.message, 'says what to send instead').toContain('send only the fields the endpoint takes');
    await expect(reader.end()).rejects.toBe(reader.refusal);
    await expect(readForm(over.raw, over.type), 'the same from a body in memory').rejects.toMatchObject({
      status: 413,
    });
  });

  it('takes 4 files and refuses a fifth', async () => {
    const files = (n: number) =>
      Array.from({ length: n }, (_, i): [string, string, string] => [`file${i}`, 'abc', `${i}.wav`]);
    const at = handForm([['model', 'm'], ...files(4)]);
    expect((await readForm(at.raw, at.type)).files.size).toBe(4);
    const over = handForm([['model', 'm'], ...files(5)]);
    await expect(readForm(over.raw, over.type)).rejects.toMatchObject({
      status: 413,
      message: expect.stringContaining('more than 4 files; send the audio as one file part named "file"'),
    });
  });

  it('counts parts busboy skips (no name) toward 68 parts', async () => {
    const nameless = Array.from({ length: 69 }, () => '--x\r\ncontent-type: text/plain\r\n\r\n1\r\n').join('');
    const raw = Buffer.from(`${nameless}--x\r\ncontent-disposition: form-data; name="model"\r\n\r\nm\r\n--x--\r\n`);
    await expect(readForm(raw, 'multipart/form-data; boundary=x')).rejects.toMatchObject({
      status: 413,
      message: expect.stringContaining(`more than ${FORM_LIMITS.parts} parts`),
    });
    const within = Buffer.from(
      `${nameless.slice(0, (nameless.length / 69) * 60)}--x\r\ncontent-disposition: form-data; name="model"\r\n\r\nm\r\n--x--\r\n`,
    );
    expect((await readForm(within, 'multipart/form-data; boundary=x')).fields).toEqual({ model: 'm' });
  });

  it('takes names of 200 bytes and refuses a longer field or file name', async () => {
    const long = 'é'.repeat(100);
    const at = handForm([
      [long, 'v'],
      ['file', 'abc', 'a.wav'],
    ]);
    expect((await readForm(at.raw, at.type)).fields[long], '200 bytes of UTF-8').toBe('v');
    for (const over of [
      handForm([[`${long}x`, 'v']]),
      handForm([
        ['model', 'm'],
        [`${long}x`, 'abc', 'a.wav'],
      ]),
    ]) {
      await expect(readForm(over.raw, over.type)).rejects.toMatchObject({
        status: 413,
        message: expect.stringContaining(`name in the form is over ${FORM_LIMITS.nameBytes} bytes`),
      });
    }
  });

  it('refuses a text field over 64 KiB with a 400, as before, saying to send it as a file', async () => {
    const over = handForm([['prompt', 'p'.repeat(FORM_LIMITS.fieldBytes + 1)]]);
    await expect(readForm(over.raw, over.type)).rejects.toMatchObject({
      code: 'LLMGW_BAD_REQUEST',
      status: 400,
      message: expect.stringContaining('send long text as a file'),
    });
  });

  it('reads a large form in slices, letting timers run between them', async () => {
    const audio = Buffer.alloc(2 * 2 ** 20, 1);
    const { raw, type } = await form([
      ['model', 'whisper'],
      ['file', new Blob([audio]), 'big.wav'],
    ]);
    let ticks = 0;
    let spinning = true;
    const spin = () => {
      if (!spinning) return;
      ticks++;
      setImmediate(spin);
    };
    setImmediate(spin);
    const read = await readForm(raw, type, { keepFiles: true });
    spinning = false;
    expect(read.files.get('file')?.bytes?.equals(audio), 'the file as sent').toBe(true);
    expect(ticks, 'the event loop turned while the form was read').toBeGreaterThan(0);
  });
});
