// multipart/form-data as OpenAI's audio endpoints take it: the router reads
// a form's fields to route an upload (the bytes go on as sent), and the sim
// engine reads one to answer it. Here because both sides need the same
// reading of a form and neither may import the other; busboy does the
// parsing (boundaries, quoting, header folding) so nothing here splits bytes
// by hand, except for replacing one field's value in place (withFormField),
// which busboy cannot do.
//
// A form is read as its bytes arrive (FormReader), a slice at a time, and
// within limits a model call never comes near: an upload of 200,000 tiny
// fields, parsed whole in one synchronous call, once held every listener of
// the control plane (heartbeats included) for 5.7 s (issue #33).
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Busboy, type BusboyFileStream, type BusboyInstance } from '@fastify/busboy';
import { LlmgwError } from '../errors/index.js';

/** A form's text fields (the last value of a repeated name wins, as Python's form readers do) and its files. */
export interface ReadForm {
  readonly fields: Readonly<Record<string, string>>;
  /** Files by field name, with their size in bytes; contents are kept only with `keepFiles`. */
  readonly files: ReadonlyMap<
    string,
    { readonly filename: string; readonly sizeBytes: number; readonly bytes: Buffer | null }
  >;
}

/**
 * What one form may hold. OpenAI's transcription and translation calls take
 * a file and up to eight text fields (model, language, prompt,
 * response_format, temperature, timestamp_granularities[] twice, include[],
 * stream, chunking_strategy), vLLM adds about twenty sampling fields, and an
 * image edit takes 16 images and a mask; these are several times that, and
 * far below what costs a server anything.
 */
export const FORM_LIMITS = {
  /** Text fields, repeated names counted each time. */
  fields: 64,
  /** File parts (a part with a filename or sent as application/octet-stream). */
  files: 4,
  /** Parts of any kind, those busboy skips (no name, not form-data) included. */
  parts: 68,
  /** A field's or file part's name, UTF-8 bytes. */
  nameBytes: 200,
  /** A text field's value, bytes: a model name or a prompt, never a file. */
  fieldBytes: 64 * 1024,
} as const;

/**
 * Bytes busboy is given in one call: between two, the reader stops once the
 * form is refused. Busboy spends about 40 µs on each part, so what a refused
 * form costs is its first 65 fields and the rest of that slice: at 16 KiB
 * of one-byte fields, some 300 parts (13 ms); at 4 KiB, 80. A 25 MiB file
 * costs no more than at 16 KiB; at 1 KiB it costs several times as much.
 */
const SLICE_BYTES = 4 * 1024;
/** Bytes readForm parses between two turns of the event loop: what one socket read brings. */
const TURN_BYTES = 64 * 1024;

/**
 * A multipart form read as its bytes come: write() each chunk as it
 * arrives, then end(). A form over FORM_LIMITS is refused as soon as the
 * part past a limit is seen (413, LLMGW_BODY_TOO_LARGE, naming the limit);
 * one busboy cannot read is refused with 400 (LLMGW_BAD_REQUEST). Once
 * refused, further bytes are not parsed.
 */
export class FormReader {
  #bb: BusboyInstance | null = null;
  #refusal: LlmgwError | null = null;
  readonly #fields: Record<string, string> = Object.create(null) as Record<string, string>;
  readonly #files = new Map<string, { filename: string; sizeBytes: number; bytes: Buffer | null }>();
  #fieldCount = 0;
  #fileCount = 0;
  #settled: Promise<ReadForm> | null = null;
  readonly #keepFiles: boolean;

  /** `keepFiles`: keep each file's bytes (the sim engine hears them); absent = count them only. */
  constructor(contentType: string | undefined, options: { keepFiles?: boolean } = {}) {
    this.#keepFiles = options.keepFiles === true;
    try {
      this.#bb = Busboy({
        headers: { 'content-type': contentType ?? '' },
        limits: { fieldSize: FORM_LIMITS.fieldBytes, parts: FORM_LIMITS.parts },
      });
    } catch (err) {
      this.#refuse(
        400,
        `the body is not a multipart form this server can read (${(err as Error).message}); send it as multipart/form-data with its boundary`,
      );
      return;
    }
    const bb = this.#bb;
    bb.on('field', (name: string, value: string, _nameCut: boolean, valueCut: boolean) => {
      if (this.#refusal || !this.#named(name, 'field')) return;
      if (++this.#fieldCount > FORM_LIMITS.fields) {
        this.#refuse(
          413,
          `the form has more than ${FORM_LIMITS.fields} fields; a model call needs a handful (model, language, prompt, …): send only the fields the endpoint takes`,
        );
        return;
      }
      if (valueCut) {
        this.#refuse(
          400,
          `the form field "${name.slice(0, 40)}" is over ${FORM_LIMITS.fieldBytes} bytes; send long text as a file`,
        );
        return;
      }
      this.#fields[name] = value;
    });
    bb.on('file', (name: string, stream: BusboyFileStream, filename: string) => {
      // A file part not kept is still drained: one left unread would hold busboy back.
      if (this.#refusal || !this.#named(name, 'file part')) return void stream.resume();
      if (++this.#fileCount > FORM_LIMITS.files) {
        this.#refuse(
          413,
          `the form has more than ${FORM_LIMITS.files} files; send the audio as one file part named "file"`,
        );
        return void stream.resume();
      }
      const file = { filename, sizeBytes: 0, bytes: null as Buffer | null };
      this.#files.set(name, file);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        file.sizeBytes += chunk.length;
        if (this.#keepFiles) chunks.push(chunk);
      });
      // A cut form fails the file's stream too; busboy's own 'error' reports it once.
      stream.on('error', () => undefined);
      stream.on('end', () => {
        if (this.#keepFiles) file.bytes = Buffer.concat(chunks);
      });
    });
    bb.on('partsLimit', () => {
      this.#refuse(
        413,
        `the form has more than ${FORM_LIMITS.parts} parts; send only the file and the fields the endpoint takes`,
      );
    });
    bb.on('error', (err: unknown) => {
      this.#refuse(
        400,
        `the multipart form cannot be read: ${(err as Error).message}; send a complete multipart/form-data body`,
      );
    });
  }

  /** Why the form is refused; null while it is not. A 413 is one of FORM_LIMITS, a 400 a form that cannot be read. */
  get refusal(): LlmgwError | null {
    return this.#refusal;
  }

  /** Parses the next bytes of the body; false once the form is refused (the rest need not be sent). */
  write(chunk: Buffer): boolean {
    for (let at = 0; at < chunk.length && !this.#refusal; at += SLICE_BYTES) {
      this.#bb!.write(chunk.subarray(at, at + SLICE_BYTES));
    }
    return this.#refusal === null;
  }

  /** The form, once the body has ended; rejects with the refusal. */
  end(): Promise<ReadForm> {
    this.#settled ??= new Promise<ReadForm>((resolve, reject) => {
      if (this.#refusal) return reject(this.#refusal);
      const bb = this.#bb!;
      bb.on('error', () => reject(this.#refusal));
      bb.on('finish', () => {
        if (this.#refusal) reject(this.#refusal);
        else resolve({ fields: this.#fields, files: this.#files });
      });
      bb.end();
    });
    return this.#settled;
  }

  /** Whether a part's name is within FORM_LIMITS.nameBytes; refuses the form when it is not. */
  #named(name: string, what: string): boolean {
    if (Buffer.byteLength(name) <= FORM_LIMITS.nameBytes) return true;
    this.#refuse(
      413,
      `a ${what} name in the form is over ${FORM_LIMITS.nameBytes} bytes; name fields as the endpoint does (model, file, language, …)`,
    );
    return false;
  }

  #refuse(status: 400 | 413, message: string): void {
    this.#refusal ??= new LlmgwError(status === 413 ? 'LLMGW_BODY_TOO_LARGE' : 'LLMGW_BAD_REQUEST', message);
  }
}

/**
 * Reads a multipart body already in memory, a socket read's worth per turn
 * of the event loop. Rejects with FormReader's refusal: LLMGW_BAD_REQUEST
 * saying what is wrong (no boundary, a truncated form, a text field over
 * 64 KiB), LLMGW_BODY_TOO_LARGE naming the limit passed.
 */
export async function readForm(
  raw: Buffer,
  contentType: string | undefined,
  options: { keepFiles?: boolean } = {},
): Promise<ReadForm> {
  const reader = new FormReader(contentType, options);
  for (let at = 0; at < raw.length && reader.write(raw.subarray(at, at + TURN_BYTES)); at += TURN_BYTES) {
    if (at + TURN_BYTES < raw.length) await nextTurn();
  }
  return reader.end();
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
export function withFormField(
  raw: Buffer,
  contentType: string | undefined,
  name: string,
  value: string,
): Buffer | null {
  const boundary = formBoundary(contentType);
  if (boundary === null) return null;
  const delimiter = Buffer.from(`--${boundary}`);
  const wanted = new RegExp(
    `^content-disposition:\\s*form-data;\\s*name="${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"\\s*$`,
    'im',
  );
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
