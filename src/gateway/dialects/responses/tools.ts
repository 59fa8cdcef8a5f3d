// A Responses request's tools, tool_choice and text.format in chat's
// shape. Only function tools are served; OpenAI's built-in tools run on
// OpenAI's servers and are refused by name. Separate from the input items
// because these are the request's options, checked once when it is parsed
// and translated again when the chat body is built. The reverse, chat's
// tools as a Responses request's for a remote that speaks the Responses API
// (remote-request.ts), is at the end: the same fields, one level flatter.
import { bad, isObject, type Json } from '../../core/translation-refusal.js';

export function chatTools(tools: readonly unknown[]): Json[] {
  return tools.map((t, i) => {
    const at = `tools[${i}]`;
    if (!isObject(t))
      throw bad('tools', `${at}: want a tool object such as {"type": "function", "name", "parameters"}`);
    if (t.type !== 'function') {
      throw bad(
        'tools',
        `${at}.type: ${JSON.stringify(t.type)} is a tool OpenAI runs on its own servers; llmgw serves only function tools ({"type": "function", "name", "parameters"}), run by the client`,
      );
    }
    if (typeof t.name !== 'string' || t.name === '')
      throw bad('tools', `${at}.name: want the function's name, a string`);
    const fn: Json = { name: t.name };
    if (typeof t.description === 'string') fn.description = t.description;
    if (t.parameters !== undefined && t.parameters !== null) {
      if (!isObject(t.parameters)) throw bad('tools', `${at}.parameters: want a JSON Schema object`);
      fn.parameters = t.parameters;
    }
    if (typeof t.strict === 'boolean') fn.strict = t.strict;
    return { type: 'function', function: fn };
  });
}

export function chatToolChoice(v: unknown): unknown {
  if (v === 'auto' || v === 'none' || v === 'required') return v;
  if (isObject(v) && v.type === 'function') {
    if (typeof v.name !== 'string' || v.name === '')
      throw bad('tool_choice', 'tool_choice.name: want the name of the function to call');
    return { type: 'function', function: { name: v.name } };
  }
  const what = isObject(v) ? `{"type": ${JSON.stringify(v.type)}}` : JSON.stringify(v);
  throw bad(
    'tool_choice',
    `tool_choice: ${what} is not supported by llmgw; want "auto", "none", "required" or {"type": "function", "name"}`,
  );
}

export function responseFormat(format: unknown): Json | null {
  if (!isObject(format)) throw bad('text', 'text.format: want {"type": "text" | "json_object" | "json_schema"}');
  switch (format.type) {
    case 'text':
      return null;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      if (typeof format.name !== 'string' || format.name === '')
        throw bad('text', "text.format.name: want the schema's name, a string");
      if (!isObject(format.schema)) throw bad('text', 'text.format.schema: want a JSON Schema object');
      const schema: Json = { name: format.name, schema: format.schema };
      if (typeof format.description === 'string') schema.description = format.description;
      if (typeof format.strict === 'boolean') schema.strict = format.strict;
      return { type: 'json_schema', json_schema: schema };
    }
    default:
      throw bad(
        'text',
        `text.format.type: want "text", "json_object" or "json_schema", got ${JSON.stringify(format.type)}`,
      );
  }
}

/** Chat's tools as a Responses request's: the function's fields lifted beside `type`. */
export function responsesTools(tools: readonly unknown[]): Json[] {
  return tools.map((t, i) => {
    const fn = isObject(t) && t.type === 'function' && isObject(t.function) ? t.function : null;
    if (!fn || typeof fn.name !== 'string')
      throw bad('tools', `tools[${i}]: only function tools can be sent to a Responses API`);
    const tool: Json = { type: 'function', name: fn.name, parameters: isObject(fn.parameters) ? fn.parameters : null };
    if (typeof fn.description === 'string') tool.description = fn.description;
    // OpenAI's Responses API defaults strict to true; chat's default is false, which is what the client asked.
    tool.strict = fn.strict === true;
    return tool;
  });
}

/** Chat's tool_choice as a Responses request's (a named function loses its `function` wrapper). */
export function responsesToolChoice(v: unknown): unknown {
  if (v === 'auto' || v === 'none' || v === 'required') return v;
  if (isObject(v) && isObject(v.function) && typeof v.function.name === 'string')
    return { type: 'function', name: v.function.name };
  throw bad('tool_choice', `tool_choice: ${JSON.stringify(v)} has no Responses counterpart`);
}

/** Chat's response_format as a Responses text.format (json_schema's fields lifted beside `type`). */
export function textFormat(format: unknown): Json {
  if (!isObject(format) || format.type === 'text' || format.type === 'json_object')
    return { type: isObject(format) ? format.type : 'text' };
  if (format.type === 'json_schema' && isObject(format.json_schema))
    return { type: 'json_schema', ...format.json_schema };
  throw bad('response_format', `response_format: ${JSON.stringify(format.type)} has no Responses counterpart`);
}
