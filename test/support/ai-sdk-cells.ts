// The AI SDK's three calls, asked of one provider against the demo: the
// same cells for its OpenAI, OpenAI-compatible and Anthropic providers
// (test/clients/*-clients.test.ts), so each provider is held to the same
// shapes. Defines its tests in the caller's describe.
import { generateObject, generateText, type LanguageModel, streamObject, tool as aiTool } from 'ai';
import { expect, it } from 'vitest';
import { forecast, schemaErrors, SHAPED_MAX_TOKENS, streamedForecast, weatherArgs } from './client-schemas.js';

const PROMPT = 'What will the weather be in Lisbon over the next three days?';

export function aiSdkCells(model: () => LanguageModel): void {
  it('generateObject returns an object that validates, with usage', async () => {
    const result = await generateObject({
      model: model(),
      schema: forecast,
      prompt: PROMPT,
      maxOutputTokens: SHAPED_MAX_TOKENS,
      maxRetries: 0,
    });
    expect(schemaErrors(forecast, result.object), 'the object').toBeNull();
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBeGreaterThan(0);
  });

  it('streamObject streams partial objects to one that validates', async () => {
    const result = streamObject({
      model: model(),
      schema: streamedForecast,
      prompt: PROMPT,
      maxOutputTokens: SHAPED_MAX_TOKENS,
      maxRetries: 0,
    });
    let partials = 0;
    for await (const _partial of result.partialObjectStream) partials++;
    expect(partials, 'partial objects while it streams').toBeGreaterThan(1);
    expect(schemaErrors(streamedForecast, await result.object), 'the final object').toBeNull();
    const usage = await result.usage;
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBeGreaterThan(0);
  });

  it('generateText calls a forced tool with input that validates and runs it', async () => {
    const inputs: unknown[] = [];
    const result = await generateText({
      model: model(),
      prompt: PROMPT,
      tools: {
        get_weather: aiTool({
          description: 'the forecast for a city',
          inputSchema: weatherArgs,
          execute: (input) => {
            inputs.push(input);
            return Promise.resolve('sunny');
          },
        }),
      },
      toolChoice: { type: 'tool', toolName: 'get_weather' },
      maxOutputTokens: SHAPED_MAX_TOKENS,
      maxRetries: 0,
    });
    expect(result.toolCalls.map((c) => c.toolName)).toEqual(['get_weather']);
    expect(schemaErrors(weatherArgs, result.toolCalls[0]!.input), 'the tool call input').toBeNull();
    expect(inputs, 'the SDK ran the tool with that input').toEqual([result.toolCalls[0]!.input]);
    expect(result.toolResults.map((r) => r.output)).toEqual(['sunny']);
  });
}
