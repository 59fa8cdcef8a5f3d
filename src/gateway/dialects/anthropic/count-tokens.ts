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

/** The replica's answer to /tokenize for the chat request's messages (and tools), with the chat template applied. */
async function askTokenizer(
  gw: DialectHost,
  replica: RouterReplica,
  upstream: Upstream,
  model: RoutedModel,
  parsed: ParsedRequest,
  requestId: string,
): Promise<{ status: number; text: string }> {
  const served = replica.servedNames ?? [model.name, ...model.aliases];
  const body = JSON.stringify({
    model: served.includes(parsed.model) ? parsed.model : model.name,
    messages: parsed.body.messages,
    ...(parsed.body.tools === undefined ? {} : { tools: parsed.body.tools }),
    add_generation_prompt: true,
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    'x-request-id': requestId,
  };
  if (replica.engineSecret !== undefined) headers.authorization = `Bearer ${replica.engineSecret}`;
  const { pool, basePath } = upstream;
  const res = await pool.request({
    path: `${basePath}/tokenize`,
    method: 'POST',
    headers,
    body,
    headersTimeout: gw.options.timeouts.headersTimeoutMs,
    bodyTimeout: gw.options.timeouts.idleBodyTimeoutMs,
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** The `count` of a 200 /tokenize answer; undefined for anything else. */
function countOf(status: number, text: string): unknown {
  try {
    return status === 200 ? (JSON.parse(text) as { count?: unknown }).count : undefined;
  } catch {
    return undefined;
  }
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
    const { status, text } = await askTokenizer(gw, replica, gw.upstreamOf(replica), model, parsed, requestId);
    const count = countOf(status, text);
    return typeof count === 'number' ? count : null;
  } catch {
    return null;
  }
}

/**
 * POST /v1/messages/count_tokens: the prompt counted by the engine's own
 * tokenizer, at one ready replica of the model: vLLM's /tokenize, which
 * takes chat messages (and tools) and applies the model's chat template,
 * as the builtin and sim engines' do. An engine without one that does
 * (llama.cpp's takes text only) is refused with a 400 saying so; with no
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
  let status: number;
  let text: string;
  try {
    ({ status, text } = await askTokenizer(gw, replica, upstream, model, parsed, request.id));
  } catch (err) {
    return gw.refuse(
      reply,
      502,
      'LLMGW_UPSTREAM',
      `replica ${replica.id} of \`${model.name}\` did not answer count_tokens: ${describeNetError(err)}`,
    );
  }
  const count = countOf(status, text);
  if (typeof count === 'number') {
    gw.count(model.name, 200, key);
    return reply
      .code(200)
      .header('content-type', 'application/json')
      .send(JSON.stringify({ input_tokens: count }));
  }
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
    `count_tokens needs a tokenizer endpoint that takes chat messages, and the engine serving model \`${model.name}\` has none ` +
      `(its /tokenize answered ${status}; vLLM, the builtin and the sim engines have one, llama.cpp's takes text only); ` +
      'the usage of each answer (input_tokens) has the exact count',
  );
}
