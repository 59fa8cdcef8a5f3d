// multipart/form-data read from a body already in memory, as OpenAI's audio
// endpoints take it: the router reads a form's fields to route an upload
// (the bytes go on as sent), and the sim engine reads one to answer it.
// Here because both sides need the same reading of a form and neither may
// import the other; busboy does the parsing (boundaries, quoting, header
// folding) so nothing here splits bytes by hand, except for replacing one
// field's value in place (withFormField), which busboy cannot do.
import { Busboy, type BusboyFileStream, type BusboyInstance } from '@fastify/busboy';
import { LlmgwError } from '../errors/index.js';

/** A form's text fields (the last value of a repeated name wins, as Python's form readers do) and its files. */
export interface ReadForm {
  readonly fields: Readonly<Record<string, string>>;
  /** Files by field name, with their size in bytes; contents are kept only with `keepFiles`. */
  readonly files: ReadonlyMap<string, { readonly filename: string; readonly sizeBytes: number; readonly bytes: Buffer | null }>;
}

/** Largest text field, bytes: a model name or a prompt, never a file. */
const MAX_FIELD_BYTES = 64 * 1024;

/**
 * Reads a multipart body. Throws LLMGW_BAD_REQUEST saying what is wrong
 * (no boundary, a truncated form, a text field over 64 KiB).
 */
export function readForm(raw: Buffer, contentType: string | undefined, options: { keepFiles?: boolean } = {}): Promise<ReadForm> {
  return new Promise((resolve, reject) => {
    let bb: BusboyInstance;
    try {
      bb = Busboy({ headers: { 'content-type': contentType ?? '' }, limits: { fieldSize: MAX_FIELD_BYTES } });
    } catch (err) {
      reject(new LlmgwError('LLMGW_BAD_REQUEST', `the body is not a multipart form this server can read (${(err as Error).message}); send it as multipart/form-data with its boundary`));
      return;
    }
    const fields: Record<string, string> = Object.create(null) as Record<string, string>;
    const files = new Map<string, { filename: string; sizeBytes: number; bytes: Buffer | null }>();
    let problem: string | null = null;
    let settled = false;
    bb.on('field', (name: string, value: string, _nameCut: boolean, valueCut: boolean) => {
      if (valueCut) problem ??= `the form field "${name.slice(0, 40)}" is over ${MAX_FIELD_BYTES} bytes`;
      fields[name] = value;
    });
    bb.on('file', (name: string, stream: BusboyFileStream, filename: string) => {
      const file = { filename, sizeBytes: 0, bytes: null as Buffer | null };
      files.set(name, file);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        file.sizeBytes += chunk.length;
        if (options.keepFiles) chunks.push(chunk);
      });
      // A cut form fails the file's stream too; busboy's own 'error' below reports it once.
      stream.on('error', () => undefined);
      stream.on('end', () => {
        if (options.keepFiles) file.bytes = Buffer.concat(chunks);
      });
    });
    bb.on('error', (err: unknown) => {
      if (settled) return;
      settled = true;
      reject(new LlmgwError('LLMGW_BAD_REQUEST', `the multipart form cannot be read: ${(err as Error).message}; send a complete multipart/form-data body`));
    });
    bb.on('finish', () => {
      if (settled) return;
      settled = true;
      if (problem) reject(new LlmgwError('LLMGW_BAD_REQUEST', `${problem}; send long text as a file`));
      else resolve({ fields, files });
    });
    bb.end(raw);
  });
}

/** The boundary of a multipart content type; null = none. */
export function formBoundary(contentType: string | undefined): string | null {
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? '');
  return m ? (m[1] ?? m[2]!) : null;
}

/**
 * The form with one text field's value replaced, every other byte as it
 * was; null when the form has no such field (or no boundary). For the
 * router, which sends a request on under the model name an engine serves.
 */
export function withFormField(raw: Buffer, contentType: string | undefined, name: string, value: string): Buffer | null {
  const boundary = formBoundary(contentType);
  if (boundary === null) return null;
  const delimiter = Buffer.from(`--${boundary}`);
  const wanted = new RegExp(`^content-disposition:\\s*form-data;\\s*name="${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"\\s*$`, 'im');
  let at = raw.indexOf(delimiter);
  while (at !== -1) {
    const headersStart = raw.indexOf('\r\n', at) + 2;
    const headersEnd = raw.indexOf('\r\n\r\n', headersStart);
    if (headersStart < 2 || headersEnd === -1) return null;
    const next = raw.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), headersEnd);
    if (next === -1) return null;
    if (wanted.test(raw.toString('latin1', headersStart, headersEnd))) {
      return Buffer.concat([raw.subarray(0, headersEnd + 4), Buffer.from(value, 'utf8'), raw.subarray(next)]);
    }
    at = next + 2;
  }
  return null;
}
