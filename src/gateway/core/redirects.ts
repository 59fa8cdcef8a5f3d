// Refuses a body that could point the request somewhere else. Some gateways
// honour `api_base`/`base_url` from the body; llmgw never does, and refuses
// such bodies so nobody believes it did. Separate from the endpoint schemas
// because it reads what they do not declare, by field name and by value,
// the same way for every endpoint.
import { LlmgwError } from '../../errors/index.js';

/**
 * Fields whose strings are the user's content, schemas or tags, where a URL
 * is ordinary text: OpenAI's (a predicted output, metadata tags) and the
 * extensions vLLM accepts (RAG documents, guided decoding, chat templates).
 */
const CONTENT_FIELDS: ReadonlySet<string> = new Set([
  'messages',
  'prompt',
  'input',
  'suffix',
  'tools',
  'functions',
  'tool_choice',
  'response_format',
  'stop',
  'logit_bias',
  'prediction',
  'metadata',
  'documents',
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'structured_outputs',
  'chat_template',
  'chat_template_kwargs',
  'mm_processor_kwargs',
  'query',
  'text_1',
  'text_2',
  'items',
  'content',
]);

/** Field names that in some gateway or SDK mean "send this request there". */
const REDIRECT_FIELDS: ReadonlySet<string> = new Set([
  'api_base',
  'base_url',
  'api_url',
  'api_host',
  'endpoint',
  'url',
  'host',
  'proxy',
  'upstream',
]);

/** scheme://…, //host…, or a bare host with a port or a path (localhost:8000, 10.0.0.1/v1); a bare address alone is an identifier. */
const URL_RE = /^\s*[a-z][a-z0-9+.-]*:\/\/|^\s*\/\/[^/]|^\s*(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?::\d+(?:\/|$)|\/)/i;

/**
 * 400 for a redirecting field name at the top (or in `extra_body`, where
 * some SDKs and gateways take them), or a URL-looking string anywhere
 * outside the content fields. A nested key named `endpoint` or `host` whose
 * value is no URL is data, not a destination.
 */
export function refuseRedirects(body: Record<string, unknown>): void {
  const refuseName = (name: string, path: string, param: string) => {
    if (REDIRECT_FIELDS.has(name.toLowerCase())) {
      throw new LlmgwError('LLMGW_BAD_REQUEST', `${path}: llmgw chooses where a request goes; remove this field`, {
        context: { param },
      });
    }
  };
  for (const [key, value] of Object.entries(body)) {
    refuseName(key, key, key);
    if (key === 'extra_body' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const inner of Object.keys(value)) refuseName(inner, `extra_body.${inner}`, key);
    }
    if (CONTENT_FIELDS.has(key)) continue;
    const where = findUrl(value, key, 0);
    if (where) {
      throw new LlmgwError(
        'LLMGW_BAD_REQUEST',
        `${where}: a URL is not accepted here, because no field may redirect the request; remove it`,
        {
          context: { param: key },
        },
      );
    }
  }
}

/** The path of the first URL-looking string under `value`; depth-bounded. */
function findUrl(value: unknown, path: string, depth: number): string | null {
  if (typeof value === 'string') return URL_RE.test(value) ? path : null;
  if (depth > 8 || value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findUrl(value[i], `${path}[${i}]`, depth + 1);
      if (hit) return hit;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const hit = findUrl(v, `${path}.${k}`, depth + 1);
    if (hit) return hit;
  }
  return null;
}
