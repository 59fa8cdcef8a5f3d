// Reading `models add FILE`: YAML or JSON (YAML is a superset), holding one
// model, a list, or `{models: [...]}` like the catalog file. The checks here
// are only the shape a definition needs to be sent at all (name, source,
// profiles with an engine); the control plane validates the rest, because the
// schema is its own and a second copy here would drift from it.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { ModelDefinition } from '../api/index.js';

export class ModelFileError extends Error {
  readonly problems: readonly string[];

  constructor(file: string, problems: readonly string[]) {
    super(`${file}: ${problems.length === 1 ? problems[0] : `\n${problems.map((p) => `- ${p}`).join('\n')}`}`);
    this.name = 'ModelFileError';
    this.problems = problems;
  }
}

/** Reads and shape-checks a model file; all problems at once, so they are fixed in one round. */
export function readModelFile(path: string): ModelDefinition[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ModelFileError(path, [
      `cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    ]);
  }
  return parseModels(text, path);
}

export function parseModels(text: string, file: string): ModelDefinition[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new ModelFileError(file, [`not valid YAML or JSON: ${(err as Error).message.split('\n')[0]}`]);
  }
  let items: unknown[];
  let where: (i: number) => string;
  if (Array.isArray(doc)) {
    items = doc;
    where = (i) => `[${i}]`;
  } else if (isObject(doc) && Array.isArray(doc.models) && doc.name === undefined) {
    items = doc.models;
    where = (i) => `models[${i}]`;
  } else if (isObject(doc)) {
    items = [doc];
    where = () => 'the model';
  } else {
    throw new ModelFileError(file, ['want a model, a list of models, or {models: [...]}']);
  }
  if (items.length === 0) throw new ModelFileError(file, ['it holds no model']);
  const problems: string[] = [];
  const names = new Set<string>();
  items.forEach((item, i) => {
    const at = where(i);
    if (!isObject(item)) {
      problems.push(`${at}: want an object with name, source and profiles`);
      return;
    }
    if (typeof item.name !== 'string' || !item.name) problems.push(`${at}.name: want a string`);
    else if (names.has(item.name)) problems.push(`${at}.name: "${item.name}" is defined twice in this file`);
    else names.add(item.name);
    if (typeof item.source !== 'string' || !item.source)
      problems.push(`${at}.source: want a string such as hf://org/repo or file:///path`);
    if (!Array.isArray(item.profiles) || item.profiles.length === 0) {
      problems.push(`${at}.profiles: want a list with at least one profile`);
    } else {
      item.profiles.forEach((p, j) => {
        if (!isObject(p) || typeof p.engine !== 'string')
          problems.push(`${at}.profiles[${j}].engine: want an engine name such as vllm or llamacpp`);
      });
    }
  });
  if (problems.length) throw new ModelFileError(file, problems);
  return items as ModelDefinition[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
