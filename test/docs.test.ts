// The documentation's own rules, so that they hold after every change: a README a newcomer reads in five
// minutes, docs/ pages whose relative links and anchors lead somewhere, an index that lists every page,
// and no file that names a file outside the repository (the repository must stand on its own).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DOCS = join(ROOT, 'docs');
const README = join(ROOT, 'README.md');
const MAX_README_LINES = 200;

/** Every file under `dir`, recursively, as absolute paths. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(path) : [path];
  });
}

const markdownPages = (): string[] => [
  README,
  ...readdirSync(DOCS)
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(DOCS, name)),
];

/** The text outside fenced code blocks, line by line (links and headings in code are not Markdown). */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced && !/^ {4}/.test(line);
  });
}

/** GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces as hyphens. */
function githubSlug(heading: string): string {
  const text = heading
    .replace(/`([^`]*)`/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** The anchors of a Markdown file's headings, numbered as GitHub numbers repeated ones (`-1`, `-2`). */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = githubSlug(heading[1]);
    const count = seen.get(slug) ?? 0;
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
    seen.set(slug, count + 1);
  }
  return anchors;
}

/** The targets of a page's inline links, code spans left out. */
function linkTargets(markdown: string): string[] {
  const prose = proseLines(markdown)
    .join('\n')
    .replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1]);
}

/** What is wrong with one relative link of `page`, or undefined when it leads somewhere. */
function brokenLink(page: string, target: string): string | undefined {
  const [path, anchor] = target.split('#', 2);
  const file = path === '' ? page : resolve(dirname(page), decodeURIComponent(path));
  const name = `${relative(ROOT, page)} → ${target}`;
  if (!file.startsWith(ROOT)) return `${name}: outside the repository`;
  let isFile: boolean;
  try {
    isFile = statSync(file).isFile();
  } catch {
    return `${name}: no such file`;
  }
  if (anchor === undefined || !isFile || extname(file) !== '.md') return undefined;
  return anchorsOf(readFileSync(file, 'utf8')).has(anchor) ? undefined : `${name}: no such heading`;
}

/** The repository's own text files that may name other files: the README, docs/, src/ and test/. */
function sourceFiles(): string[] {
  const text = /\.(md|ts|mts|js|mjs|c|h|sh)$/;
  const fixtures = join(ROOT, 'test', 'fixtures') + sep;
  return [README, ...filesUnder(DOCS), ...filesUnder(join(ROOT, 'src')), ...filesUnder(join(ROOT, 'test'))].filter(
    (file) => text.test(file) && (!file.startsWith(fixtures) || file.endsWith('.md')),
  );
}

/** Relative paths in `content` that climb out of the repository from `file`'s folder. */
function pathsOutside(file: string, content: string): string[] {
  const paths = [...content.matchAll(/(?:^|[\s'"`(=:,[])((?:\.\.\/)+[^\s'"`)\],;]*)/gm)].map((match) => match[1]);
  return paths.filter((path) => {
    const target = resolve(dirname(file), path);
    return target !== ROOT.replace(/[\\/]$/, '') && !target.startsWith(ROOT);
  });
}

describe('the documentation', () => {
  it(`keeps the README to at most ${MAX_README_LINES} lines`, () => {
    const lines = readFileSync(README, 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(MAX_README_LINES);
  });

  it('has relative links that lead to existing files and headings', () => {
    const broken = markdownPages().flatMap((page) =>
      linkTargets(readFileSync(page, 'utf8'))
        .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
        .map((target) => brokenLink(page, target))
        .filter((problem): problem is string => problem !== undefined),
    );
    expect(broken).toEqual([]);
  });

  it('lists every page of docs/ in its index', () => {
    const index = readFileSync(join(DOCS, 'README.md'), 'utf8');
    const pages = readdirSync(DOCS).filter((name) => name.endsWith('.md') && name !== 'README.md');
    expect(pages.filter((name) => !index.includes(`](${name})`))).toEqual([]);
  });

  it('is linked from the README: the index and the contract', () => {
    const readme = readFileSync(README, 'utf8');
    expect(readme).toContain('](docs/README.md)');
    expect(readme).toContain('](docs/api.md)');
  });
});

describe('the repository stands on its own', () => {
  it('names no file outside it (README, docs/, src/, test/)', () => {
    const found = sourceFiles().flatMap((file) => {
      const content = readFileSync(file, 'utf8');
      const named = [...content.matchAll(/\b(?:CONTRACT|SPEC)\.md\b/g)].map((match) => match[0]);
      return [...named, ...pathsOutside(file, content)].map((name) => `${relative(ROOT, file)}: ${name}`);
    });
    expect(found).toEqual([]);
  });

  it('knows a path that climbs out when it sees one', () => {
    // Built, not written out, so that this file does not name them itself.
    const twoUp = '../'.repeat(2);
    const sibling = ['..', 'elsewhere', 'notes.md'].join('/');
    expect(pathsOutside(README, `see ${sibling} and ${twoUp}x`)).toEqual([sibling, `${twoUp}x`]);
    const page = join(DOCS, 'page.md');
    expect(pathsOutside(page, 'see [the README](../README.md) and `../src/app.ts`')).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    expect(githubSlug('Compartments and `$everything`')).toBe('compartments-and-everything');
    expect(githubSlug('2. Sustained load, and 3. SIGKILL')).toBe('2-sustained-load-and-3-sigkill');
    expect(githubSlug('SMART Backend Services (client_credentials)')).toBe('smart-backend-services-client_credentials');
    expect(githubSlug('`resource_link`: local references, for referential integrity')).toBe(
      'resource_link-local-references-for-referential-integrity',
    );
  });
});
