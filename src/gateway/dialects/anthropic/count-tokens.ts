// POST /v1/messages/count_tokens: Anthropic's token count, asked of a ready
// replica's own tokenizer. Its own file because it is the one route of the
// gateway that asks a replica a question of its own instead of relaying the
// client's request through the attempt loop. The stream's relay asks the
// same question (promptCount) for message_start's count.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { describeNetError } from '../../core/relay.js';
import type { DialectHost } from '../../core/dialect.js';
import type { RoutedModel, RouterReplica } from '../../ports/index.js';
import type { Upstream } from '../../core/upstreams.js';
import type { ParsedRequest } from '../../core/validate.js';

/**
 * Engines that count a chat request's prompt as their usage will: vLLM's
 * /tokenize takes chat messages (and tools) and applies the chat template,
 * as the builtin and sim engines' do; llama.cpp's takes text only, so its
 * template is applied first (/apply-template) and the text counted with the
 * special tokens its chat completions add. An engine not named
 * (RouterReplica.engine absent) may have neither.
 */
export const COUNTS_PROMPTS: ReadonlySet<string> = new Set(['vllm', 'builtin', 'sim', 'llamacpp']);

/** One POST of JSON to the replica, answered with its status and text. */
async function ask(
  gw: DialectHost,
  replica: RouterReplica,
  upstream: Upstream,
  path: string,
  body: unknown,
  requestId: string,
): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    'x-request-id': requestId,
  };
  if (replica.engineSecret !== undefined) headers.authorization = `Bearer ${replica.engineSecret}`;
  const res = await upstream.pool.request({
    path: `${upstream.basePath}${path}`,
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    headersTimeout: gw.options.timeouts.headersTimeoutMs,
    bodyTimeout: gw.options.timeouts.idleBodyTimeoutMs,
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** The status to report for an answer that carried no count: a 200 without one is the engine's fault (502). */
function uncounted(status: number): { status: number } {
  return uncounted(status);
}

/** A 200 answer's JSON; undefined for anything else. */
function answered(status: number, text: string): Record<string, unknown> | undefined {
  if (status !== 200) return undefined;
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/**
 * The chat request's prompt tokens as the replica's engine counts them, or
 * the status of the answer that said it cannot (see COUNTS_PROMPTS).
 */
async function askTokenizer(
  gw: DialectHost,
  replica: RouterReplica,
  upstream: Upstream,
  model: RoutedModel,
  parsed: ParsedRequest,
  requestId: string,
): Promise<{ count: number } | { status: number }> {
  const tools = parsed.body.tools === undefined ? {} : { tools: parsed.body.tools };
  if (replica.engine === 'llamacpp') {
    const template = await ask(
      gw,
      replica,
      upstream,
      '/apply-template',
      { messages: parsed.body.messages, ...tools },
      requestId,
    );
    const prompt = answered(template.status, template.text)?.prompt;
    if (typeof prompt !== 'string') return uncounted(template.status);
    const tokenized = await ask(gw, replica, upstream, '/tokenize', { content: prompt, add_special: true }, requestId);
    const tokens = answered(tokenized.status, tokenized.text)?.tokens;
    return Array.isArray(tokens) ? { count: tokens.length } : uncounted(tokenized.status);
  }
  const served = replica.servedNames ?? [model.name, ...model.aliases];
  const body = {
    model: served.includes(parsed.model) ? parsed.model : model.name,
    messages: parsed.body.messages,
    ...tools,
    add_generation_prompt: true,
  };
  const { status, text } = await ask(gw, replica, upstream, '/tokenize', body, requestId);
  const count = answered(status, text)?.count;
  return typeof count === 'number' ? { count } : uncounted(status);
}

/**
 * The prompt's token count for a stream's message_start, asked of the
 * replica the attempt went to, while its engine prefills; null when it
 * cannot be had (no tokenizer that takes chat messages, an error): then
 * message_start says 0 and message_delta the engine's count. Never throws.
 */
export async function promptCount(
  gw: DialectHost,
  replica: RouterReplica,
  model: RoutedModel,
  parsed: ParsedRequest,
  requestId: string,
): Promise<number | null> {
  try {
    const counted = await askTokenizer(gw, replica, gw.upstreamOf(replica), model, parsed, requestId);
    return 'count' in counted ? counted.count : null;
  } catch {
    return null;
  }
}

/**
 * POST /v1/messages/count_tokens: the prompt counted by the engine's own
 * tokenizer, at one ready replica of the model (see COUNTS_PROMPTS). An
 * engine without one is refused with a 400 saying so; with no
 * ready replica, 503 (nothing is held or started for a count). The call
 * counts against the key's request limit and costs it no tokens.
 */
export async function countTokens(gw: DialectHost, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const key = request.apiKey;
  const { parsed, model, tab } = request.call!;
  tab.release();
  const chosen = gw.replicaFor(model, parsed);
  if (chosen === null) {
    return gw.refuse(
      reply,
      503,
      'LLMGW_NO_REPLICA',
      `model \`${model.name}\` has 0 ready replicas: ${gw.describe(model.name)}; count_tokens asks a ready replica's tokenizer`,
    );
  }
  const { replica, upstream } = chosen;
  let counted: Awaited<ReturnType<typeof askTokenizer>>;
  try {
    counted = await askTokenizer(gw, replica, upstream, model, parsed, request.id);
  } catch (err) {
    return gw.refuse(
      reply,
      502,
      'LLMGW_UPSTREAM',
      `replica ${replica.id} of \`${model.name}\` did not answer count_tokens: ${describeNetError(err)}`,
    );
  }
  if ('count' in counted) {
    gw.count(model.name, 200, key);
    return reply
      .code(200)
      .header('content-type', 'application/json')
      .send(JSON.stringify({ input_tokens: counted.count }));
  }
  const { status } = counted;
  if (status >= 500)
    return gw.refuse(
      reply,
      502,
      'LLMGW_UPSTREAM',
      `replica ${replica.id} of \`${model.name}\` answered count_tokens with ${status}`,
    );
  return gw.refuse(
    reply,
    400,
    'LLMGW_BAD_REQUEST',
    `count_tokens needs the engine's tokenizer, and the engine serving model \`${model.name}\` has none llmgw knows ` +
      `(it answered ${status}; vLLM, llama.cpp, the builtin and the sim engines have one); ` +
      'the usage of each answer (input_tokens) has the exact count',
  );
}
