// The import graph between folders, checked: a cycle between two folders
// (the router importing the store's folder while the store imports the
// router) means neither part can be read, tested or changed without the
// other, and it creeps in one harmless-looking `import type` at a time. So
// this test reads every source file's imports with the TypeScript compiler
// (type-only imports too: they are design dependencies even though they
// vanish from the JavaScript) and fails with the cycle's path.
//
// The graph is checked at every folder depth: at depth 1 a node is a
// top-level part (`src/control`, `src/gateway`), at depth 2 a folder such as
// `src/control/store`, and so on down to the deepest folder; a file above
// the depth is its own folder's node. A cycle between two parts is as bad
// as one between two leaves, and counting only leaf folders missed it
// (`src/router` and `src/control` imported each other through different
// subfolders). The few subfolders in SUBFOLDERS_OF_ONE_PART count as their
// parent at every depth. Test files are left out: a test may exercise two
// parts together without making one depend on the other.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(name) && !/\.d\.ts$/.test(name) && !/\.test\.tsx?$/.test(name)) out.push(path);
  }
  return out;
}

/** The file a relative specifier names (`./x.js` is `./x.ts` or `./x.tsx`); null for packages and Node's modules. */
function resolveSpecifier(fromFile: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const base = resolve(dirname(fromFile), specifier);
  const stem = base.replace(/\.(js|jsx|ts|tsx|mjs)$/, '');
  for (const candidate of [`${stem}.ts`, `${stem}.tsx`, join(base, 'index.ts'), base]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not this one; try the next spelling.
    }
  }
  throw new Error(`${relative(ROOT, fromFile)} imports "${specifier}", which names no file; fix the import`);
}

/** Every module a file imports or re-exports, type-only and dynamic `import()` included. */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  return info.importedFiles.map((f) => resolveSpecifier(file, f.fileName)).filter((f): f is string => f !== null);
}

/**
 * Subfolders that are their parent's own code, split off for length only,
 * and count as the parent: the dashboard's pages are built from its
 * components and render its data, and its routes serve them. Keep this
 * short; a subfolder that is a part of its own belongs off the list.
 */
const SUBFOLDERS_OF_ONE_PART: ReadonlyMap<string, string> = new Map([
  ['src/control/dashboard/pages', 'src/control/dashboard'],
]);

/** The node a file belongs to at `depth` folders below src/ (Infinity = its own folder). */
const folderOf = (file: string, depth = Infinity): string => {
  const full = relative(ROOT, dirname(file)).split(sep).join('/');
  const folder = SUBFOLDERS_OF_ONE_PART.get(full) ?? full;
  return folder
    .split('/')
    .slice(0, depth + 1)
    .join('/');
};

interface Edge {
  /** The importing file and the file it imports, as a reader would open them. */
  readonly from: string;
  readonly to: string;
}

/** Every source file and what it imports, read once. */
function fileImports(): Map<string, string[]> {
  return new Map(sourceFiles(SRC).map((file) => [file, importsOf(file)]));
}

/**
 * Folder → folder it imports → one file-level import that makes the edge
 * (the first found), for the failure message; folders cut at `depth`.
 */
function folderGraph(files: ReadonlyMap<string, readonly string[]>, depth = Infinity): Map<string, Map<string, Edge>> {
  const graph = new Map<string, Map<string, Edge>>();
  for (const [file, targets] of files) {
    const from = folderOf(file, depth);
    const edges = graph.get(from) ?? new Map<string, Edge>();
    graph.set(from, edges);
    for (const target of targets) {
      const to = folderOf(target, depth);
      if (to !== from && !edges.has(to)) edges.set(to, { from: relative(ROOT, file), to: relative(ROOT, target) });
    }
  }
  return graph;
}

/** How many folders deep under src/ the tree goes. */
function deepest(files: ReadonlyMap<string, readonly string[]>): number {
  let most = 1;
  for (const file of files.keys()) most = Math.max(most, relative(SRC, dirname(file)).split(sep).length);
  return most;
}

/** A report per cycle found at any depth, each with its path and the import behind every step; empty = none. */
function cycleReports(files: ReadonlyMap<string, readonly string[]>): string[] {
  const reports: string[] = [];
  for (let depth = 1; depth <= deepest(files); depth++) {
    const graph = folderGraph(files, depth);
    for (const component of cyclicComponents(graph)) {
      const cycle = cycleThrough(graph, new Set(component), component[0]!);
      reports.push(
        `at depth ${depth}, ${component.length} folders import one another round (${component.join(', ')}); one cycle:\n${describeCycle(graph, cycle)}`,
      );
    }
  }
  return reports;
}

/** The strongly connected components with more than one folder (Tarjan), each a set of folders that import one another round. */
function cyclicComponents(graph: Map<string, Map<string, Edge>>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components;
}

/** One shortest cycle through `start` inside its component (breadth first), as the folders in order, `start` again at the end. */
function cycleThrough(graph: Map<string, Map<string, Edge>>, component: ReadonlySet<string>, start: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, start];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

function describeCycle(graph: Map<string, Map<string, Edge>>, cycle: readonly string[]): string {
  const lines = [`  ${cycle.join(' -> ')}`];
  for (let i = 0; i + 1 < cycle.length; i++) {
    const edge = graph.get(cycle[i]!)!.get(cycle[i + 1]!)!;
    lines.push(`    ${edge.from} imports ${edge.to}`);
  }
  return lines.join('\n');
}

describe('the import graph between folders', () => {
  const files = fileImports();
  const graph = folderGraph(files);

  it('has no cycle at any folder depth, type-only imports included', () => {
    const reports = cycleReports(files);
    expect(
      reports,
      `folders that import one another cannot be read or changed apart; move the shared types to the lower part (a port the gateway owns, src/protocol, src/http) or invert the dependency:\n${reports.join('\n')}`,
    ).toEqual([]);
  });

  it('fails when a cycle between two parts is added, even one their leaf folders do not show', () => {
    // The gateway's relay importing the catalog would close src/gateway -> src/control -> src/gateway at depth 1,
    // while at the leaves it is src/gateway/core -> src/control/catalog, and src/control/keys -> src/gateway/ports:
    // no loop.
    const withCycle = new Map(files);
    const relay = join(SRC, 'gateway/core/relay.ts');
    withCycle.set(relay, [...(files.get(relay) ?? []), join(SRC, 'control/catalog/index.ts')]);
    const reports = cycleReports(withCycle);
    expect(reports.length, 'the added import makes a cycle the check must report').toBeGreaterThan(0);
    expect(reports[0], 'reported at the depth of the two parts, naming the import that closes it').toContain(
      'at depth 1',
    );
    expect(reports.join('\n')).toContain('src/gateway/core/relay.ts imports src/control/catalog/index.ts');
  });

  it('keeps the gateway off the control plane: the control plane implements the ports it owns', () => {
    for (const outside of ['src/control', 'src/agent', 'src/ctl', 'src/cli']) {
      expect(
        importsFromUnder('src/gateway', outside),
        `src/gateway must not import ${outside}; what it needs from outside is an interface in src/gateway/ports/index.ts`,
      ).toEqual([]);
    }
  });

  /** Each folder under `part` and what it imports from under `forbidden`, as "file imports file". */
  const importsFromUnder = (part: string, forbidden: string): string[] =>
    [...graph.entries()]
      .filter(([from]) => from === part || from.startsWith(`${part}/`))
      .flatMap(([, edges]) =>
        [...edges.entries()]
          .filter(([to]) => to === forbidden || to.startsWith(`${forbidden}/`))
          .map(([, e]) => `${e.from} imports ${e.to}`),
      );

  it('keeps ctl off the control plane: it reaches it over HTTP through src/api', () => {
    expect(
      importsFromUnder('src/ctl', 'src/control'),
      'src/ctl must not import src/control; share types through src/api or src/protocol',
    ).toEqual([]);
  });

  it('keeps the agent off the control plane: they meet in src/protocol', () => {
    expect(
      importsFromUnder('src/agent', 'src/control'),
      'src/agent must not import src/control; wire types belong in src/protocol',
    ).toEqual([]);
  });

  it('names a cycle in order, each step with an import that makes it', () => {
    const edge = (from: string, to: string): [string, Edge] => [to, { from: `${from}/x.ts`, to: `${to}/index.ts` }];
    const toy = new Map([
      ['a', new Map([edge('a', 'b')])],
      ['b', new Map([edge('b', 'c'), edge('b', 'd')])],
      ['c', new Map([edge('c', 'a')])],
      ['d', new Map<string, Edge>()],
    ]);
    const components = cyclicComponents(toy);
    expect(components, 'a, b and c import one another round; d only is imported').toEqual([['a', 'b', 'c']]);
    expect(
      describeCycle(toy, cycleThrough(toy, new Set(components[0]), 'a')),
      'the path, then the import behind each step',
    ).toBe(
      [
        '  a -> b -> c -> a',
        '    a/x.ts imports b/index.ts',
        '    b/x.ts imports c/index.ts',
        '    c/x.ts imports a/index.ts',
      ].join('\n'),
    );
  });

  it('keeps every file of the gateway under 400 lines, tests included, so each part reads on its own', () => {
    const gateway = join(SRC, 'gateway');
    const all = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? all(path) : /\.tsx?$/.test(name) ? [path] : [];
      });
    const long = all(gateway)
      .map((file) => ({ file: relative(ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > 400)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long, 'split these by what each part is, as src/gateway/core and the dialects are split').toEqual([]);
  });

  it('sees the imports it checks (a parser that read nothing would pass everything)', () => {
    expect(
      graph.get('src/gateway')?.has('src/errors'),
      'src/gateway imports src/errors, so the graph must have that edge',
    ).toBe(true);
  });
});
