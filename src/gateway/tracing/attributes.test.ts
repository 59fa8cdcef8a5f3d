// The span attribute names and the readings that fill them. The names are
// copies of OpenTelemetry's incubating GenAI conventions: a rename upstream
// would otherwise leave llmgw's spans under names no backend knows.
import * as semconv from '@opentelemetry/semantic-conventions/incubating';
import { describe, expect, it } from 'vitest';
import { answerFacts, ATTR, inputMessages, outputMessages, requestedMaxTokens } from './attributes.js';

describe('span attributes', () => {
  it("names the GenAI attributes as OpenTelemetry's semantic conventions do", () => {
    expect([
      ATTR.operationName,
      ATTR.requestModel,
      ATTR.requestMaxTokens,
      ATTR.requestStream,
      ATTR.responseModel,
      ATTR.responseId,
      ATTR.finishReasons,
      ATTR.timeToFirstChunk,
      ATTR.inputTokens,
      ATTR.outputTokens,
      ATTR.inputMessages,
      ATTR.outputMessages,
      ATTR.serverAddress,
      ATTR.serverPort,
      ATTR.errorType,
    ]).toEqual([
      semconv.ATTR_GEN_AI_OPERATION_NAME,
      semconv.ATTR_GEN_AI_REQUEST_MODEL,
      semconv.ATTR_GEN_AI_REQUEST_MAX_TOKENS,
      semconv.ATTR_GEN_AI_REQUEST_STREAM,
      semconv.ATTR_GEN_AI_RESPONSE_MODEL,
      semconv.ATTR_GEN_AI_RESPONSE_ID,
      semconv.ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
      semconv.ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
      semconv.ATTR_GEN_AI_USAGE_INPUT_TOKENS,
      semconv.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
      semconv.ATTR_GEN_AI_INPUT_MESSAGES,
      semconv.ATTR_GEN_AI_OUTPUT_MESSAGES,
      semconv.ATTR_SERVER_ADDRESS,
      semconv.ATTR_SERVER_PORT,
      semconv.ATTR_ERROR_TYPE,
    ]);
  });

  it.each([
    [
      'a stream’s last chunks',
      'data: {"id":"c1","model":"m","choices":[{"finish_reason":null}]}\n\ndata: {"id":"c1","model":"m","choices":[{"index":0,"finish_reason":"stop"}]}\n\n',
      ['stop'],
      'm',
      'c1',
    ],
    [
      'two choices',
      '{"id":"x","model":"m2","choices":[{"finish_reason":"stop"},{"finish_reason": "length"}]}',
      ['stop', 'length'],
      'm2',
      'x',
    ],
    [
      'Anthropic’s stop_reason',
      '{"type":"message_delta","delta":{"stop_reason":"end_turn"}}',
      ['end_turn'],
      undefined,
      undefined,
    ],
    ['text that only mentions a key', '{"content":"say \\"finish_reason\\": \\"stop\\""}', [], undefined, undefined],
  ])('reads finish reasons, model and id from %s', (_what, tail, reasons, model, id) => {
    const facts = answerFacts(tail);
    expect(facts.finishReasons).toEqual(reasons);
    expect(facts.model).toBe(model);
    expect(facts.id).toBe(id);
  });

  it('reads the cap, the prompt and a whole answer', () => {
    expect(requestedMaxTokens({ max_completion_tokens: 7 })).toBe(7);
    expect(requestedMaxTokens({ max_output_tokens: 9 })).toBe(9);
    expect(requestedMaxTokens({}), 'absent = none set').toBeUndefined();
    expect(inputMessages({ prompt: 'once' })).toBe('[{"role":"user","content":"once"}]');
    expect(inputMessages({ file: 'x' }), 'no prompt in the body').toBeUndefined();
    expect(outputMessages('{"choices":[{"message":{"role":"assistant","content":"hi"}}]}')).toBe(
      '[{"role":"assistant","content":"hi"}]',
    );
    expect(outputMessages('{"choices":[{"message":{"ro'), 'a cut answer records nothing').toBeUndefined();
  });
});
