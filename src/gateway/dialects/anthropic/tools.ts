// Tools and tool_choice between Anthropic's Messages API and Chat
// Completions, both ways side by side: a client's Messages tools become
// chat's (chatTools, chatToolChoice: the dialect's request), and a chat
// request's become a Messages request's for a remote that speaks Anthropic
// (messagesTools, messagesToolChoice: remote-request.ts). Anthropic's tool
// is chat's function under other names (input_schema for parameters, `any`
// for `required`, disable_parallel_tool_use for parallel_tool_calls false).
import { bad, isObject, type Json } from '../../core/translation-refusal.js';

/** A Messages request's tools as chat's; throws LLMGW_BAD_REQUEST naming the tool. */
export function chatTools(v: unknown): Json[] {
  if (!Array.isArray(v)) throw bad('tools', 'tools: want a list of {"name", "description", "input_schema"} objects');
  return v.map((t, i) => {
    if (!isObject(t)) throw bad('tools', `tools[${i}]: want an object`);
    if (t.type !== undefined && t.type !== null && t.type !== 'custom') {
      throw bad(
        'tools',
        `tools[${i}].type: ${JSON.stringify(t.type)} is a tool Anthropic runs itself; llmgw supports only client tools (name, description, input_schema)`,
      );
    }
    if (typeof t.name !== 'string' || t.name === '') throw bad('tools', `tools[${i}].name: want a string`);
    if (!isObject(t.input_schema)) throw bad('tools', `tools[${i}].input_schema: want a JSON Schema object`);
    const fn: Json = { name: t.name, parameters: t.input_schema };
    if (typeof t.description === 'string') fn.description = t.description;
    return { type: 'function', function: fn };
  });
}

/** A Messages tool_choice as chat's tool_choice (and parallel_tool_calls). */
export function chatToolChoice(v: unknown): Json {
  if (!isObject(v)) throw bad('tool_choice', 'tool_choice: want {"type": "auto" | "any" | "tool" | "none"}');
  const out: Json = {};
  switch (v.type) {
    case 'auto':
      out.tool_choice = 'auto';
      break;
    case 'any':
      out.tool_choice = 'required';
      break;
    case 'none':
      out.tool_choice = 'none';
      break;
    case 'tool':
      if (typeof v.name !== 'string') throw bad('tool_choice', 'tool_choice.name: want the name of the tool to call');
      out.tool_choice = { type: 'function', function: { name: v.name } };
      break;
    default:
      throw bad('tool_choice', `tool_choice.type: want "auto", "any", "tool" or "none", got ${JSON.stringify(v.type)}`);
  }
  if (v.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  return out;
}

/** Chat's tools as a Messages request's; a tool that is not a function cannot be sent (throws, naming it). */
export function messagesTools(v: unknown): Json[] {
  if (!Array.isArray(v)) throw bad('tools', 'tools: want a list of function tools');
  return v.map((t, i) => {
    const fn = isObject(t) && t.type === 'function' && isObject(t.function) ? t.function : null;
    if (!fn || typeof fn.name !== 'string')
      throw bad('tools', `tools[${i}]: only function tools can be sent to an Anthropic Messages API`);
    // Anthropic requires a schema; a function without parameters takes none.
    const tool: Json = {
      name: fn.name,
      input_schema: isObject(fn.parameters) ? fn.parameters : { type: 'object', properties: {} },
    };
    if (typeof fn.description === 'string') tool.description = fn.description;
    return tool;
  });
}

/**
 * Chat's tool_choice and parallel_tool_calls as a Messages tool_choice;
 * null = neither was set (Anthropic's default, auto, applies).
 */
export function messagesToolChoice(choice: unknown, parallel: unknown): Json | null {
  let out: Json | null = null;
  if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'required') out = { type: 'any' };
  else if (choice === 'none') out = { type: 'none' };
  else if (isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string')
    out = { type: 'tool', name: choice.function.name };
  else if (choice !== undefined && choice !== null)
    throw bad('tool_choice', `tool_choice: ${JSON.stringify(choice)} has no Anthropic counterpart`);
  if (parallel === false) out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return out;
}
