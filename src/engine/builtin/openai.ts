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
import { MAX_TOP_LOGPROBS, type TokenLogprob } from './logprobs.js';
import { ResponseFormatSchema, ToolCallSchema, ToolChoiceSchema, ToolSchema } from './tools.js';

/** Most choices one request may ask for: each is a whole generation on this CPU engine. */
export const MAX_CHOICES = 16;

const Stop = z.union([z.string(), z.array(z.string()).max(4, 'OpenAI allows at most 4 stop sequences')]).nullish();

const ContentPart = z.object({ type: z.string(), text: z.string().optional() });

const ChatMessage = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.union([z.string(), z.array(ContentPart)]).nullish(),
  tool_calls: z.array(ToolCallSchema).nullish(),
  tool_call_id: z.string().nullish(),
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
  n: z
    .number()
    .int()
    .min(1)
    .max(MAX_CHOICES, `this engine writes at most ${MAX_CHOICES} choices per request`)
    .nullish(),
  logprobs: z.union([z.boolean(), z.number()]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
};

export const ChatCompletionRequestSchema = z.object({
  ...sampling,
  messages: z.array(ChatMessage).min(1, 'send at least one message'),
  max_completion_tokens: z.number().int().min(1).nullish(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS, `top_logprobs is at most ${MAX_TOP_LOGPROBS}`).nullish(),
  tools: z.array(ToolSchema).nullish(),
  tool_choice: ToolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: ResponseFormatSchema.nullish(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/**
 * POST /tokenize as vLLM takes it (`prompt`, or chat `messages` with the
 * model's template) and as llama.cpp does (`content`); model absent = the
 * engine's own, as both engines allow.
 */
export const TokenizeRequestSchema = z
  .object({
    model: z.string().min(1).nullish(),
    prompt: z.string().optional(),
    content: z.string().optional(),
    messages: z.array(z.unknown()).optional(),
    tools: z.array(z.unknown()).nullish(),
    tool_choice: z.unknown().optional(),
    /** vLLM's: the BOS token first where the model has one; absent = true. */
    add_special_tokens: z.boolean().nullish(),
    /** llama.cpp's name for the same; absent = false, as llama.cpp's default for /tokenize. */
    add_special: z.boolean().nullish(),
    return_token_strs: z.boolean().nullish(),
  })
  .refine((b) => b.prompt !== undefined || b.content !== undefined || b.messages !== undefined, {
    message: 'want the text as prompt (or content), or chat messages',
    path: ['prompt'],
  });

export const DetokenizeRequestSchema = z.object({
  model: z.string().min(1).nullish(),
  tokens: z.array(z.number().int('want whole token ids').min(0, 'want token ids of 0 or more')),
});

export const CompletionRequestSchema = z.object({
  ...sampling,
  prompt: z.union([z.string(), z.array(z.string())]),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

export const EmbeddingRequestSchema = z.object({
  model: z.string().min(1),
  input: z.union([
    z.string(),
    z.array(z.string()).min(1, 'send at least one input').max(2048, 'send at most 2048 inputs at once'),
  ]),
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

/**
 * How many alternatives per token the request wants, or undefined for no
 * logprobs. Chat asks with `logprobs: true` and `top_logprobs`; completions
 * with `logprobs: <count>`, at most 5 as OpenAI allows there.
 */
function requestedLogprobs(request: ChatCompletionRequest | CompletionRequest): number | undefined {
  if ('messages' in request) {
    if (request.logprobs !== true && request.logprobs != null && request.logprobs !== false) {
      throw unsupported(
        'logprobs',
        'logprobs on /v1/chat/completions is true or false; send the number of alternatives as top_logprobs',
      );
    }
    if (request.logprobs !== true) {
      if (request.top_logprobs != null) throw unsupported('top_logprobs', 'top_logprobs needs logprobs: true');
      return undefined;
    }
    return request.top_logprobs ?? 0;
  }
  if (request.logprobs == null || request.logprobs === false) return undefined;
  if (
    typeof request.logprobs !== 'number' ||
    !Number.isInteger(request.logprobs) ||
    request.logprobs < 0 ||
    request.logprobs > 5
  ) {
    throw unsupported('logprobs', 'logprobs on /v1/completions is the number of alternatives per token, 0 to 5');
  }
  return request.logprobs;
}

export function samplingParams(
  request: ChatCompletionRequest | CompletionRequest,
  maxTokens: number | null | undefined,
): SamplingParams {
  const logprobs = requestedLogprobs(request);
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
    ...(logprobs === undefined ? {} : { logprobs }),
  };
}

/** A chat choice's `logprobs` in OpenAI's shape; null when none were asked for. */
export function chatLogprobs(logprobs: readonly TokenLogprob[] | undefined) {
  if (!logprobs) return null;
  return {
    content: logprobs.map((t) => ({
      token: t.token,
      logprob: t.logprob,
      bytes: t.bytes,
      top_logprobs: t.top.map(({ token, logprob, bytes }) => ({ token, logprob, bytes })),
    })),
    refusal: null,
  };
}

/** A completion choice's `logprobs` in the legacy shape /v1/completions answers with; null when none were asked for. */
export function completionLogprobs(logprobs: readonly TokenLogprob[] | undefined) {
  if (!logprobs) return null;
  let offset = 0;
  const textOffset = logprobs.map((t) => {
    const at = offset;
    offset += t.token.length;
    return at;
  });
  return {
    tokens: logprobs.map((t) => t.token),
    token_logprobs: logprobs.map((t) => t.logprob),
    top_logprobs: logprobs.map((t) => Object.fromEntries(t.top.map((a) => [a.token, a.logprob]))),
    text_offset: textOffset,
  };
}

/**
 * OpenAI messages as chat turns; developer counts as system, and only text
 * content is read. A tool message is the result of a call the assistant
 * made earlier: it is folded into that call, which is how node-llama-cpp's
 * chat templates write a call and its result.
 */
export function chatTurns(request: ChatCompletionRequest): ChatTurn[] {
  const turns: ChatTurn[] = [];
  const calls = new Map<string, NonNullable<ChatTurn['toolCalls']>[number]>();
  for (const [i, message] of request.messages.entries()) {
    // OpenAI lets only an assistant turn (one that calls tools) leave content out.
    if (message.content == null && message.role !== 'assistant') {
      throw unsupported(
        `messages[${i}].content`,
        `messages[${i}] (role ${message.role}) has no content; a ${message.role} message needs content, a string or text parts`,
      );
    }
    const parts =
      typeof message.content === 'string'
        ? [message.content]
        : (message.content ?? []).map((part, j) => {
            if (part.type !== 'text' || part.text === undefined) {
              throw unsupported(
                `messages[${i}].content[${j}]`,
                `the builtin engine reads text only; content of type ${part.type} is not supported`,
              );
            }
            return part.text;
          });
    const content = parts.join('');
    if (message.role === 'system' || message.role === 'developer') turns.push({ role: 'system', content });
    else if (message.role === 'user') turns.push({ role: 'user', content });
    else if (message.role === 'assistant') {
      const toolCalls = (message.tool_calls ?? []).map((call, j) => {
        let args: unknown;
        try {
          args = JSON.parse(call.function.arguments);
        } catch {
          throw unsupported(
            `messages[${i}].tool_calls[${j}].function.arguments`,
            'the arguments of an earlier tool call are not JSON; send them as the model wrote them',
          );
        }
        const turnCall = { name: call.function.name, arguments: args, result: undefined as string | undefined };
        calls.set(call.id, turnCall);
        return turnCall;
      });
      turns.push(toolCalls.length > 0 ? { role: 'assistant', content, toolCalls } : { role: 'assistant', content });
    } else if (message.role === 'tool') {
      const call = message.tool_call_id == null ? undefined : calls.get(message.tool_call_id);
      if (!call) {
        throw unsupported(
          `messages[${i}].tool_call_id`,
          `a tool message answers a call an earlier assistant message made; no assistant message has a tool call with id "${message.tool_call_id ?? ''}"`,
        );
      }
      call.result = content;
    } else {
      throw unsupported(
        `messages[${i}].role`,
        'the builtin engine reads function results from tool messages; the deprecated function role is not supported',
      );
    }
  }
  return turns;
}

export function completionPrompt(request: CompletionRequest): string {
  if (request.n != null && request.n !== 1)
    throw unsupported(
      'n',
      'the builtin engine writes one completion per request on /v1/completions; send n: 1 or use /v1/chat/completions',
    );
  if (request.echo) throw unsupported('echo', 'the builtin engine does not echo prompts; leave echo out');
  if (request.suffix) throw unsupported('suffix', 'the builtin engine does not fill in the middle; leave suffix out');
  if (typeof request.prompt === 'string') return request.prompt;
  if (request.prompt.length !== 1)
    throw unsupported('prompt', 'the builtin engine takes one prompt per request; send a string');
  return request.prompt[0]!;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/** An aborted generation has no client to read its reason; what remains is OpenAI's three. */
export function openAiFinishReason(reason: FinishReason): 'stop' | 'length' | 'tool_calls' {
  return reason === 'aborted' ? 'stop' : reason;
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
