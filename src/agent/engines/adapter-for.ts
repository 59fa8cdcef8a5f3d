// The one place an engine name from the catalog becomes an adapter, so an
// unknown name is refused with the list of known ones instead of somewhere
// deep in a start.
import { LlmgwError } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';
import { builtinAdapter, simAdapter } from './llmgw-engines.js';
import { llamacppAdapter } from './llamacpp.js';
import { sglangAdapter } from './sglang.js';
import {
  ENGINE_NAMES,
  compileEngineAdapterOptions,
  isEngineName,
  type EngineAdapter,
  type EngineAdapterOptions,
} from './shard-launch.js';
import { vllmAdapter } from './vllm.js';

/**
 * The adapter for `engine`. Throws LLMGW_ENGINE_UNKNOWN for a name llmgw has
 * no adapter for, and LLMGW_CONFIG_INVALID when `sim` or `builtin` is asked
 * for without options.llmgwBin.
 */
export function adapterFor(engine: string, options: EngineAdapterOptions = {}): EngineAdapter {
  if (!isEngineName(engine)) {
    const near = nearestName(engine, ENGINE_NAMES);
    throw new LlmgwError(
      'LLMGW_ENGINE_UNKNOWN',
      `no engine is named ${JSON.stringify(engine)}${near ? `; did you mean ${near}?` : ''} (llmgw runs ${ENGINE_NAMES.join(', ')})`,
      { context: { engine } },
    );
  }
  const compiled = compileEngineAdapterOptions(options);
  switch (engine) {
    case 'vllm':
      return vllmAdapter(compiled);
    case 'llamacpp':
      return llamacppAdapter(compiled);
    case 'sglang':
      return sglangAdapter(compiled);
    case 'sim':
      return simAdapter(compiled);
    case 'builtin':
      return builtinAdapter(compiled);
  }
}
