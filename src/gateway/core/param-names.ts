// Request fields named as the client sent them. An engine speaks Chat
// Completions, so its 400s name Chat's fields (`response_format.json_schema
// .schema.minLength`, `tools[0].function.parameters`); a client of the
// Responses or Messages API sent `text.format` or `tools[0].input_schema`
// and must be told about those. Each dialect lists its renames; this module
// applies them to an engine's error body, in `param` and in the message.
// Apart from the dialects because the body's shape (OpenAI's) is the core's.

/** Chat's name (a pattern matched where a field path starts) and the dialect's, longest first; `$1` keeps an index. */
export type ParamRenames = readonly (readonly [RegExp, string])[];

/** `text` with every Chat field path in it named as the dialect names it. */
export function renameParams(text: string, renames: ParamRenames): string {
  for (const [chat, own] of renames) text = text.replace(new RegExp(`(?<![\\w.\\]])${chat.source}`, 'g'), own);
  return text;
}

/**
 * An engine's error body (OpenAI's shape) with its `param` and message
 * naming the dialect's fields; a body that is not one comes back as it was.
 */
export function renameErrorParams(body: string, renames: ParamRenames): string {
  let parsed: { error?: { message?: unknown; param?: unknown } };
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch {
    return body;
  }
  const error = parsed.error;
  if (typeof error !== 'object' || error === null) return body;
  if (typeof error.param === 'string') error.param = renameParams(error.param, renames);
  if (typeof error.message === 'string') error.message = renameParams(error.message, renames);
  return JSON.stringify(parsed);
}
