import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

/**
 * Keeps docs/behaviour.md honest: every clause id the tests and the source cite has its rule
 * there, and the `Tests:` line under each rule names exactly the test files whose titles cite
 * it, so that one search for an id finds its rule and its tests.
 */

const ROOT = resolve(__dirname, '..');
const DOC = 'docs/behaviour.md';

/** A clause id: a group letter of docs/behaviour.md and a number (`S3`, `I15`). */
const CLAUSE = '[SPTUHCRDI][1-9][0-9]*';

/**
 * An id cited in a test title: a whole word, maybe with the letter of a part (`S1c` is S1),
 * followed by `:`, `,`, `/`, a space, `)`, the end of the title, or `-` and another id (both
 * ends of a range count).
 */
const TITLE_CITATION = new RegExp(`\\b(${CLAUSE})[a-c]?(?=[:,/ )]|-${CLAUSE}|$)`, 'g');

/**
 * A clause id inside a comment: a whole word, not part of `U+0000`, `#C1` or a hex number
 * (`0xD1` has no word boundary before the letter).
 */
const COMMENT_ID = new RegExp(`(?<![+#])\\b(${CLAUSE})[a-c]?\\b`, 'g');

/**
 * A comment line that opens with a clause id, as rule comments do (`// I9: ...`,
 * ` * S3 / I5: ...`, `/** U6: ... *\/`): such an id must be a known one.
 */
const COMMENT_OPENING = new RegExp(
  `^\\s*(?:\\/\\/+|\\/\\*+|\\*)?\\s*(${CLAUSE})[a-c]?(?=:| \\/|,)`,
);

/** A rule heading: `### S3 — abort stops the running turn`. */
const RULE_HEADING = new RegExp(`^#{2,4} (${CLAUSE}) — \\S`);

/** `/`-separated path relative to the repository root. */
const fromRoot = (absolute: string) => relative(ROOT, absolute).split(sep).join('/');

/** Every file under `dir` whose name ends with one of `extensions`. */
function filesUnder(dir: string, extensions: readonly string[]): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return filesUnder(path, extensions);
    return extensions.some((ext) => entry.endsWith(ext)) ? [path] : [];
  });
}

/** Ids cited in one test title (part letters dropped, each id once). */
export function idsInTitle(title: string): string[] {
  return [...new Set([...title.matchAll(TITLE_CITATION)].map((match) => match[1]))];
}

/** The name a call is made through: `it`, `it.only`, `it.each(rows)` and `describe.skip` all give their root. */
function rootName(callee: ts.Expression): string | undefined {
  let node: ts.Expression = callee;
  for (;;) {
    if (ts.isIdentifier(node)) return node.text;
    if (ts.isPropertyAccessExpression(node) || ts.isCallExpression(node)) node = node.expression;
    else return undefined;
  }
}

/** The text of a title argument: a string, a template (substitutions as `${}`) or a `+` of those. */
function titleText(node: ts.Expression | undefined): string | undefined {
  if (!node) return undefined;
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node))
    return node.head.text + node.templateSpans.map((span) => '${}' + span.literal.text).join('');
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken)
    return (titleText(node.left) ?? '') + (titleText(node.right) ?? '');
  return undefined;
}

/** Titles of the `describe`, `it` and `test` calls of a file (`it.each(rows)(title, fn)` included). */
export function testTitles(text: string): string[] {
  const source = ts.createSourceFile('scan.ts', text, ts.ScriptTarget.Latest, true);
  const titles: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node)) {
      const root = rootName(node.expression);
      // `it.each(rows)` itself is not the titled call: the call it returns is.
      const isTableOnly =
        ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'each';
      if ((root === 'it' || root === 'test' || root === 'describe') && !isTableOnly) {
        const title = titleText(node.arguments[0]);
        if (title !== undefined) titles.push(title);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return titles;
}

/** The comments of a TypeScript or JavaScript file (JSDoc included), each once. */
export function commentsOf(text: string, fileName = 'scan.ts'): string[] {
  const kind = fileName.endsWith('.js') ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const byPos = new Map<number, string>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const range of ranges ?? []) byPos.set(range.pos, text.slice(range.pos, range.end));
  };
  const visit = (node: ts.Node) => {
    add(ts.getLeadingCommentRanges(text, node.pos));
    add(ts.getTrailingCommentRanges(text, node.end));
    ts.forEachChild(node, visit);
  };
  visit(source);
  add(ts.getLeadingCommentRanges(text, source.endOfFileToken.pos));
  return [...byPos.values()];
}

/** One rule of the doc: its id, the line of its heading and the paths of its `Tests:` lines. */
interface Rule {
  id: string;
  line: number;
  tests: string[];
  testLines: number;
}

/** The rules of the doc, in order (a repeated id appears twice). */
export function rulesOf(doc: string): Rule[] {
  const rules: Rule[] = [];
  doc.split('\n').forEach((text, index) => {
    const heading = RULE_HEADING.exec(text);
    if (heading) {
      rules.push({ id: heading[1], line: index + 1, tests: [], testLines: 0 });
      return;
    }
    // Any other heading ends the rule above it.
    if (/^#{1,4} /.test(text)) {
      rules.push({ id: '', line: index + 1, tests: [], testLines: 0 });
      return;
    }
    const current = rules[rules.length - 1];
    if (current && text.startsWith('Tests:')) {
      current.testLines += 1;
      current.tests.push(...[...text.matchAll(/`([^`]+)`/g)].map((match) => match[1]));
    }
  });
  return rules.filter((rule) => rule.id !== '');
}

/** Whether `text` mentions `id` as a whole id (`S1` is not in `S10`). */
const mentions = (text: string, id: string) => new RegExp(`\\b${id}(?![0-9])`).test(text);

describe('behaviour doc (docs/behaviour.md)', () => {
  const doc = readFileSync(join(ROOT, DOC), 'utf8');
  const rules = rulesOf(doc);
  const defined = new Set(rules.map((rule) => rule.id));

  /** test file -> its titles (every `.ts` file of test/: specs, shared suites, support). */
  const titlesByFile = new Map(
    filesUnder(join(ROOT, 'test'), ['.ts']).map((path) => [
      fromRoot(path),
      testTitles(readFileSync(path, 'utf8')),
    ]),
  );

  /** id -> test files whose titles cite it. */
  const citedBy = new Map<string, Set<string>>();
  for (const [file, titles] of titlesByFile)
    for (const title of titles)
      for (const id of idsInTitle(title)) {
        if (!citedBy.has(id)) citedBy.set(id, new Set());
        citedBy.get(id)!.add(file);
      }

  it('the scanners find cited ids and skip hex, code points and words', () => {
    expect(idsInTitle('S2/I1-I3: one running turn')).toEqual(['S2', 'I1', 'I3']);
    expect(idsInTitle('timeline 7 (S1c, H, I9): a discarded input')).toEqual(['S1', 'I9']);
    expect(idsInTitle('H4, S3, P5: a stop mid-stream')).toEqual(['H4', 'S3', 'P5']);
    expect(idsInTitle('stopping (S3)')).toEqual(['S3']);
    expect(idsInTitle('escapes U+0000 and 0xD1, keeps SHA1 and S10x apart')).toEqual([]);
    expect(
      testTitles(
        [
          "describe('S3: a', () => {",
          "  it.each([1])('I5: b %s', () => {});",
          '  test(`U7: ${name} c`, () => {});',
          "  it.only('T1, ' + 'T2: d', () => {});",
          '});',
        ].join('\n'),
      ),
    ).toEqual(['S3: a', 'I5: b %s', 'U7: ${} c', 'T1, T2: d']);
    expect(
      commentsOf(
        ['/** S1: doc */', "const a = '// not a comment'; // I9: trailing", '/* U+0000 */'].join(
          '\n',
        ),
      ),
    ).toEqual(['/** S1: doc */', '// I9: trailing', '/* U+0000 */']);
    expect(
      [...'/* S3, I15; 0xD1 U+0000 #C1C1C1 SHA1 */'.matchAll(COMMENT_ID)].map((m) => m[1]),
    ).toEqual(['S3', 'I15']);
    expect(COMMENT_OPENING.exec(' * S3 / I5: stops')?.[1]).toBe('S3');
    expect(COMMENT_OPENING.exec('// the H1 heading')).toBeNull();
  });

  it('docs/behaviour.md defines each clause id once, under a heading that starts with it', () => {
    expect(rules.length).toBeGreaterThan(0);
    const problems = rules
      .filter((rule, index) => rules.findIndex((other) => other.id === rule.id) !== index)
      .map((rule) => `${DOC}:${rule.line}: ${rule.id} has a second heading`);
    expect(problems).toEqual([]);
  });

  it('every rule in docs/behaviour.md has one Tests: line naming at least one test file', () => {
    const problems = rules
      .filter((rule) => rule.testLines !== 1 || rule.tests.length === 0)
      .map(
        (rule) =>
          `${DOC}:${rule.line}: ${rule.id} has ${rule.testLines} Tests: lines and ${rule.tests.length} test files`,
      );
    expect(problems).toEqual([]);
  });

  it('every clause id cited in a test title has its rule in docs/behaviour.md', () => {
    expect(citedBy.size).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const [file, titles] of titlesByFile)
      for (const title of titles)
        for (const id of idsInTitle(title))
          if (!defined.has(id))
            problems.push(`${file}: title "${title}" cites ${id}, which has no heading in ${DOC}`);
    expect(problems).toEqual([]);
  });

  it('every clause id cited in a comment in src/ has its rule in docs/behaviour.md', () => {
    const problems: string[] = [];
    let cited = 0;
    for (const path of filesUnder(join(ROOT, 'src'), ['.ts', '.js'])) {
      const file = fromRoot(path);
      for (const comment of commentsOf(readFileSync(path, 'utf8'), file)) {
        // Ids of known rules count as citations; other words of that shape are left alone...
        cited += [...comment.matchAll(COMMENT_ID)].filter((m) => defined.has(m[1])).length;
        // ...unless a comment line opens with one, the way rules are cited (`// I9: ...`).
        for (const line of comment.split('\n')) {
          const id = COMMENT_OPENING.exec(line)?.[1];
          if (id && !defined.has(id))
            problems.push(
              `${file}: comment "${line.trim()}" cites ${id}, which has no heading in ${DOC}`,
            );
        }
      }
    }
    expect(cited).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });

  it('every Tests: path in docs/behaviour.md exists and its text contains the id', () => {
    const problems: string[] = [];
    for (const rule of rules)
      for (const file of rule.tests) {
        const path = join(ROOT, file);
        if (!existsSync(path))
          problems.push(`${DOC}: ${rule.id} lists ${file}, which does not exist`);
        else if (!mentions(readFileSync(path, 'utf8'), rule.id))
          problems.push(`${DOC}: ${rule.id} lists ${file}, which does not mention ${rule.id}`);
      }
    expect(problems).toEqual([]);
  });

  it('every test file whose titles cite an id is listed under that id in docs/behaviour.md', () => {
    const problems: string[] = [];
    for (const rule of rules) {
      const files = citedBy.get(rule.id) ?? new Set<string>();
      for (const file of files)
        if (!rule.tests.includes(file))
          problems.push(`${DOC}: ${rule.id} does not list ${file}, whose test titles cite it`);
      for (const file of rule.tests)
        if (existsSync(join(ROOT, file)) && !files.has(file))
          problems.push(
            `${DOC}: ${rule.id} lists ${file}, but no test title there cites ${rule.id}`,
          );
    }
    expect(problems).toEqual([]);
  });
});
