import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

/**
 * Holds the folder table of ARCHITECTURE.md: which folder may import which, and that other
 * folders are reached only through their door (`index.ts`).
 */

const ROOT = resolve(__dirname, '..');
const SRC = join(ROOT, 'src');

/** Folder -> folders it may import (ARCHITECTURE.md, "Folders"). */
const ALLOWED: Record<string, readonly string[]> = {
  contracts: [],
  hooks: ['contracts'],
  usage: ['contracts'],
  prompt: ['contracts', 'usage'],
  // The agent module binds the default adapters (llm, session-bridge) and the default
  // dispatcher (distribution), through their doors.
  agent: ['contracts', 'hooks', 'prompt', 'usage', 'llm', 'session-bridge', 'distribution'],
  'session-bridge': ['contracts'],
  llm: ['contracts'],
  distribution: ['contracts'],
  // Health needs the model registry.
  api: ['contracts', 'agent', 'llm'],
  server: ['contracts', 'api'],
  // The testing entry (`nest-agent-orchestrator/testing`): the contracts' types only.
  testing: ['contracts'],
};

/** Folders that are entry points of their own: nothing else in src imports them. */
const OWN_ENTRIES = new Set(['testing']);

/** Top-level files of the server's composition root: may import every door; only each other. */
// The server's composition root: app.module, main, app.config (with the variables' parsers of
// app.env) and the agent options it builds.
const COMPOSITION_ROOT = new Set([
  'app.module',
  'main',
  'app.config',
  'app.env',
  'app.agent-options',
]);
/** The library's public surface: may import every door; nothing imports it. */
const PUBLIC_SURFACE = 'index';

/** Where a file sits: a folder of `src/`, or a top-level file (named without `.ts`). */
type Unit = { kind: 'folder'; name: string } | { kind: 'file'; name: string };

/** One import of one file, with what it resolves to inside `src/`. */
interface ImportEdge {
  file: string;
  line: number;
  specifier: string;
  /** Path relative to `src/`, without extension, `/`-separated; `index` for a folder's door. */
  target: string;
}

/** Every `.ts` file under `dir` that is not a spec or a declaration file. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    const isSource =
      entry.endsWith('.ts') &&
      !entry.endsWith('.spec.ts') &&
      !entry.endsWith('.e2e-spec.ts') &&
      !entry.endsWith('.d.ts');
    return isSource ? [path] : [];
  });
}

/**
 * Module specifiers of a file, with their line: static imports and re-exports (multi-line and
 * type-only ones included), `import()` and `require()`, as TypeScript's pre-processor sees them.
 */
export function importsOf(text: string): { specifier: string; line: number }[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  const source = ts.createSourceFile('scan.ts', text, ts.ScriptTarget.Latest, false);
  return importedFiles.map((ref) => ({
    specifier: ref.fileName,
    line: source.getLineAndCharacterOfPosition(ref.pos).line + 1,
  }));
}

/** `src/`-relative, `/`-separated path without `.ts`. */
const fromSrc = (absolute: string) =>
  relative(SRC, absolute).split(sep).join('/').replace(/\.ts$/, '');

/**
 * What a specifier points at inside `src/`, or `undefined` for a package. A directory resolves
 * to its `index`, as Node and TypeScript resolve it.
 */
function resolveInSrc(file: string, specifier: string): string | undefined {
  let absolute: string;
  if (specifier.startsWith('.')) absolute = resolve(dirname(file), specifier);
  else if (specifier === 'src' || specifier.startsWith('src/')) absolute = resolve(ROOT, specifier);
  else return undefined;
  if (!absolute.startsWith(SRC)) return undefined;
  if (existsSync(absolute) && statSync(absolute).isDirectory()) absolute = join(absolute, 'index');
  return fromSrc(absolute.replace(/\.(js|ts)$/, ''));
}

function unitOf(srcPath: string): Unit {
  const slash = srcPath.indexOf('/');
  return slash < 0
    ? { kind: 'file', name: srcPath }
    : { kind: 'folder', name: srcPath.slice(0, slash) };
}

const label = (unit: Unit) => (unit.kind === 'folder' ? `${unit.name}/` : `${unit.name}.ts`);

/** Every import of every source file that points inside `src/`. */
function scanSrc(): ImportEdge[] {
  return sourceFiles(SRC).flatMap((file) =>
    importsOf(readFileSync(file, 'utf8')).flatMap(({ specifier, line }) => {
      const target = resolveInSrc(file, specifier);
      return target === undefined ? [] : [{ file: fromSrc(file), line, specifier, target }];
    }),
  );
}

/** The rule an import breaks, or `undefined`. */
function violationOf(edge: ImportEdge): string | undefined {
  const from = unitOf(edge.file);
  const to = unitOf(edge.target);
  if (from.kind === to.kind && from.name === to.name) return undefined;
  if (to.kind === 'file') {
    if (to.name === PUBLIC_SURFACE) return 'nothing imports the public surface src/index.ts';
    if (COMPOSITION_ROOT.has(to.name)) {
      return from.kind === 'file' && COMPOSITION_ROOT.has(from.name)
        ? undefined
        : `nothing outside the composition root imports ${label(to)}`;
    }
    return `${label(to)} is not in the architecture table`;
  }
  if (OWN_ENTRIES.has(to.name)) {
    return `${label(to)} is an entry point of its own (package.json exports): nothing in src imports it`;
  }
  if (from.kind === 'folder') {
    const allowed = ALLOWED[from.name];
    if (!allowed) return `folder ${label(from)} is not in the architecture table`;
    if (!allowed.includes(to.name)) {
      return `${label(from)} may not import ${label(to)} (allowed: ${allowed.join(', ') || 'nothing in src'})`;
    }
  }
  if (edge.target !== `${to.name}/index`) {
    return `reaches behind the door of ${label(to)}: import '${doorSpecifier(edge)}' instead`;
  }
  return undefined;
}

/** The relative specifier of the target folder's door, as seen from the importing file. */
function doorSpecifier(edge: ImportEdge): string {
  const door = relative(dirname(join(SRC, edge.file)), join(SRC, unitOf(edge.target).name));
  return door.split(sep).join('/');
}

const describeEdge = (edge: ImportEdge, problem: string) =>
  `src/${edge.file}.ts:${edge.line} imports '${edge.specifier}': ${problem}`;

/** The engine's phases: siblings that only the runner composes. */
const PHASES = 'agent/engine/phases/';
const MAX_FUNCTION_LINES = 60;
const MAX_FILE_LINES = 300;

describe('architecture (ARCHITECTURE.md folder table)', () => {
  const edges = scanSrc();

  it('the scanner reads multi-line, type-only and re-export imports, import() and require()', () => {
    const text = [
      'import {',
      '  a,',
      '  b,',
      "} from '../hooks/compose';",
      "import type { T } from '../contracts';",
      "export * from './x';",
      "const lazy = () => import('../llm');",
      "const req = require('../usage');",
    ].join('\n');

    expect(importsOf(text)).toEqual([
      { specifier: '../hooks/compose', line: 4 },
      { specifier: '../contracts', line: 5 },
      { specifier: './x', line: 6 },
      { specifier: '../llm', line: 7 },
      { specifier: '../usage', line: 8 },
    ]);
  });

  it('the rules catch a wrong folder, a reach behind a door and an import of the root', () => {
    const edge = (file: string, target: string): ImportEdge => ({
      file,
      line: 1,
      specifier: target,
      target,
    });

    expect(violationOf(edge('hooks/hook.registry', 'prompt/index'))).toMatch(/may not import/);
    expect(violationOf(edge('agent/engine/x', 'prompt/prompt.assembler'))).toMatch(
      /behind the door of prompt\/: import '..\/..\/prompt'/,
    );
    expect(violationOf(edge('agent/agent.module', 'app.module'))).toMatch(/composition root/);
    expect(violationOf(edge('main', 'index'))).toMatch(/public surface/);
    expect(violationOf(edge('main', 'app.module'))).toBeUndefined();
    expect(violationOf(edge('agent/engine/x', 'agent/tools/tool.registry'))).toBeUndefined();
    expect(violationOf(edge('api/health/health.controller', 'llm/index'))).toBeUndefined();
    expect(violationOf(edge('index', 'testing/index'))).toMatch(/entry point of its own/);
    expect(violationOf(edge('testing/scripted-provider', 'contracts/index'))).toBeUndefined();
  });

  it('finds the source files and their imports', () => {
    const files = new Set(edges.map((e) => e.file));

    expect(files.size).toBeGreaterThan(10);
    expect(files).toContain('agent/agent.module');
  });

  it('every folder of src/ is in the table and has a door (index.ts)', () => {
    const folders = readdirSync(SRC).filter((entry) => statSync(join(SRC, entry)).isDirectory());
    const problems = folders.flatMap((folder) => [
      ...(ALLOWED[folder] ? [] : [`src/${folder}/ is not in the architecture table`]),
      ...(existsSync(join(SRC, folder, 'index.ts')) ? [] : [`src/${folder}/ has no index.ts`]),
    ]);

    expect(problems).toEqual([]);
  });

  it('folders import only the folders the table allows, and only through their doors', () => {
    const violations = edges.flatMap((edge) => {
      const problem = violationOf(edge);
      return problem ? [describeEdge(edge, problem)] : [];
    });

    expect(violations).toEqual([]);
  });

  it('nothing in src imports app.module, main or src/index (the composition root imports only itself)', () => {
    const violations = edges
      .filter((edge) => {
        const to = unitOf(edge.target);
        return to.kind === 'file' && (to.name === PUBLIC_SURFACE || COMPOSITION_ROOT.has(to.name));
      })
      .flatMap((edge) => {
        const problem = violationOf(edge);
        return problem ? [describeEdge(edge, problem)] : [];
      });

    expect(violations).toEqual([]);
  });

  it('contracts holds types only: no Nest runtime', () => {
    const violations = sourceFiles(join(SRC, 'contracts')).flatMap((file) =>
      importsOf(readFileSync(file, 'utf8'))
        .filter(({ specifier }) => specifier.startsWith('@nestjs/'))
        .map(({ specifier, line }) => `src/${fromSrc(file)}.ts:${line} imports '${specifier}'`),
    );

    expect(violations).toEqual([]);
  });

  it('the testing entry loads only node: built-ins and the contracts, and them only as types', () => {
    const files = sourceFiles(join(SRC, 'testing'));
    const problems = files.flatMap((file) => {
      const text = readFileSync(file, 'utf8');
      const typeOnly = typeOnlySpecifiers(text);
      return importsOf(text).flatMap(({ specifier, line }) => {
        const where = `src/${fromSrc(file)}.ts:${line} imports '${specifier}'`;
        if (specifier.startsWith('node:') || specifier.startsWith('./')) return [];
        if (specifier === '../contracts' && typeOnly.has(specifier)) return [];
        return [where];
      });
    });

    expect(files.length).toBeGreaterThan(3);
    expect(problems).toEqual([]);
  });

  it('no engine phase imports another phase: the runner calls them as siblings', () => {
    const violations = edges
      .filter((edge) => edge.file.startsWith(PHASES) && edge.target.startsWith(PHASES))
      .map((edge) => describeEdge(edge, 'a phase may not import another phase'));

    expect(edges.some((edge) => edge.file.startsWith(PHASES))).toBe(true);
    expect(violations).toEqual([]);
  });

  it(`no function in src/agent or src/distribution is over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = ['agent', 'distribution']
      .flatMap((folder) => sourceFiles(join(SRC, folder)))
      .flatMap((file) => longFunctions(file, MAX_FUNCTION_LINES));

    expect(long).toEqual([]);
  });

  it(`no file in src is over ${MAX_FILE_LINES} lines (the dashboard's own script and styles aside)`, () => {
    const long = allFiles(SRC)
      .filter((file) => !/\/api\/dashboard\/[^/]+\.(js|css)$/.test(file))
      .map((file) => ({ file, lines: readFileSync(file, 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > MAX_FILE_LINES)
      .map(({ file, lines }) => `src/${relative(SRC, file)}: ${lines} lines`);

    expect(long).toEqual([]);
  });

  it('the size rules see long functions and files', () => {
    const text = ['function long() {', ...Array(61).fill('  work();'), '}'].join('\n');

    expect(functionLengths(text)).toEqual([{ name: 'long', line: 1, lines: 63 }]);
  });
});

/** Specifiers a text imports with `import type` only (every import of them is type-only). */
function typeOnlySpecifiers(text: string): Set<string> {
  const source = ts.createSourceFile('scan.ts', text, ts.ScriptTarget.Latest, false);
  const kinds = new Map<string, boolean>();
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) {
      continue;
    }
    const specifier = statement.moduleSpecifier.text;
    const typeOnly = statement.importClause?.isTypeOnly === true;
    kinds.set(specifier, (kinds.get(specifier) ?? true) && typeOnly);
  }
  return new Set([...kinds].filter(([, typeOnly]) => typeOnly).map(([specifier]) => specifier));
}

/** Every file under `dir`. */
function allFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? allFiles(path) : [path];
  });
}

/** Functions, methods, accessors and arrow functions of a text, with their length in lines. */
export function functionLengths(text: string): { name: string; line: number; lines: number }[] {
  const source = ts.createSourceFile('scan.ts', text, ts.ScriptTarget.Latest, true);
  const found: { name: string; line: number; lines: number }[] = [];
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = lineOf(node.getStart(source));
      const name = node.name && ts.isIdentifier(node.name) ? node.name.text : '(anonymous)';
      found.push({ name, line: start, lines: lineOf(node.getEnd()) - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function longFunctions(file: string, max: number): string[] {
  return functionLengths(readFileSync(file, 'utf8'))
    .filter((f) => f.lines > max)
    .map((f) => `src/${relative(SRC, file)}:${f.line} ${f.name}: ${f.lines} lines`);
}
