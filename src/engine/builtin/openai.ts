// OpenAI's wire shapes as the builtin engine speaks them: request schemas
// (unknown fields ignored, as OpenAI-compatible servers do, since SDKs send
// fields an engine has no use for), the translation to SamplingParams, and
// the response, chunk and error bodies in OpenAI's exact field names. Kept
// apart from server.ts so that the HTTP plumbing and the API's shapes can be
// read, and changed, one at a time.
import { z } from 'zod';
import { LlmgwError, openAiErrorCode, openAiErrorType } from '../../errors/index.js';
import { describeIssues, formatPath } from '../../validation/index.js';
import type { ChatTurn, FinishReason, SamplingParams } from './llama-runtime.js';

const Stop = z.union([z.string(), z.array(z.string()).max(4, 'OpenAI allows at most 4 stop sequences')]).nullish();

const ContentPart = z.object({ type: z.string(), text: z.string().optional() });

const ChatMessage = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.union([z.string(), z.array(ContentPart)]).nullish(),
});

const sampling = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  stop: Stop,
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  n: z.number().int().nullish(),
  logprobs: z.union([z.boolean(), z.number()]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
};

export const ChatCompletionRequestSchema = z.object({
  ...sampling,
  messages: z.array(ChatMessage).min(1, 'send at least one message'),
  max_completion_tokens: z.number().int().min(1).nullish(),
  tools: z.array(z.unknown()).nullish(),
  response_format: z.object({ type: z.string() }).nullish(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

export const CompletionRequestSchema = z.object({
  ...sampling,
  prompt: z.union([z.string(), z.array(z.string())]),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

export const EmbeddingRequestSchema = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).min(1, 'send at least one input').max(2048, 'send at most 2048 inputs at once')]),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: z.number().int().nullish(),
});
export type EmbeddingRequest = z.infer<typeof EmbeddingRequestSchema>;

/** Parses a body against a schema; a failure is LLMGW_BAD_REQUEST naming the first wrong field as `param`. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const problems = describeIssues(schema, parsed.error);
  const first = parsed.error.issues[0];
  throw new LlmgwError('LLMGW_BAD_REQUEST', `the request body: ${problems.join('; ')}`, {
    context: { param: first && first.path.length > 0 ? formatPath(first.path) : null },
  });
}

function unsupported(param: string, message: string): LlmgwError {
  return new LlmgwError('LLMGW_BAD_REQUEST', message, { context: { param } });
}

/** Fields this engine cannot honour are refused by name rather than silently ignored. */
function refuseUnsupported(request: ChatCompletionRequest | CompletionRequest): void {
  if (request.n != null && request.n !== 1) throw unsupported('n', 'the builtin engine generates one choice per request; send n: 1 or leave it out');
  if (request.logprobs) throw unsupported('logprobs', 'the builtin engine does not return logprobs; leave logprobs out');
}

export function samplingParams(request: ChatCompletionRequest | CompletionRequest, maxTokens: number | null | undefined): SamplingParams {
  refuseUnsupported(request);
  const stop = request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop;
  return {
    maxTokens: maxTokens ?? undefined,
    // OpenAI's defaults, not llama.cpp's: temperature 1, no nucleus cut, no repetition penalty.
    temperature: request.temperature ?? 1,
    topP: request.top_p ?? 1,
    // llama.cpp seeds are 32-bit; OpenAI's are any integer.
    seed: request.seed == null ? undefined : ((request.seed % 2 ** 32) + 2 ** 32) % 2 ** 32,
    stop: stop.filter((s) => s !== ''),
    frequencyPenalty: request.frequency_penalty ?? 0,
    presencePenalty: request.presence_penalty ?? 0,
  };
}

/** OpenAI messages as chat turns; developer counts as system, and only text content is read. */
export function chatTurns(request: ChatCompletionRequest): ChatTurn[] {
  if (request.tools && request.tools.length > 0) throw unsupported('tools', 'the builtin engine does not call tools; leave tools out');
  if (request.response_format && request.response_format.type !== 'text') {
    throw unsupported('response_format', `the builtin engine only writes plain text; response_format ${request.response_format.type} is not supported`);
  }
  return request.messages.map((message, i): ChatTurn => {
    // OpenAI lets only an assistant turn (one that calls tools) leave content out.
    if (message.content == null && message.role !== 'assistant') {
      throw unsupported(`messages[${i}].content`, `messages[${i}] (role ${message.role}) has no content; a ${message.role} message needs content, a string or text parts`);
    }
    const parts = typeof message.content === 'string' ? [message.content] : (message.content ?? []).map((part, j) => {
      if (part.type !== 'text' || part.text === undefined) {
        throw unsupported(`messages[${i}].content[${j}]`, `the builtin engine reads text only; content of type ${part.type} is not supported`);
      }
      return part.text;
    });
    const content = parts.join('');
    if (message.role === 'system' || message.role === 'developer') return { role: 'system', content };
    if (message.role === 'assistant') return { role: 'assistant', content };
    if (message.role === 'user') return { role: 'user', content };
    throw unsupported(`messages[${i}].role`, `the builtin engine does not call tools, so a ${message.role} message has nothing to answer`);
  });
}

export function completionPrompt(request: CompletionRequest): string {
  if (request.echo) throw unsupported('echo', 'the builtin engine does not echo prompts; leave echo out');
  if (request.suffix) throw unsupported('suffix', 'the builtin engine does not fill in the middle; leave suffix out');
  if (typeof request.prompt === 'string') return request.prompt;
  if (request.prompt.length !== 1) throw unsupported('prompt', 'the builtin engine takes one prompt per request; send a string');
  return request.prompt[0]!;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** An aborted generation has no client to read its reason; what remains is OpenAI's two. */
export function openAiFinishReason(reason: FinishReason): 'stop' | 'length' {
  return reason === 'length' ? 'length' : 'stop';
}

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string; llmgw_code: string };
}

/** The router's error shape: OpenAI's `code` where it has one, llmgw's always in `llmgw_code`. */
export function errorBody(status: number, code: string, message: string, param: string | null = null): OpenAiErrorBody {
  return { error: { message, type: openAiErrorType(status), param, code: openAiErrorCode(code), llmgw_code: code } };
}

/** Float32 little-endian bytes in base64: what the OpenAI SDKs ask for by default and decode. */
export function base64Embedding(vector: readonly number[]): string {
  const floats = Float32Array.from(vector);
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64');
}
