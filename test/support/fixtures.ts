/**
 * Where the test fixtures live: `test/fixtures/` in this repository, so that a fresh clone tests with
 * nothing beside it. Each folder holds only the files some test reads, and a README naming the source
 * and licence of the data.
 */
import { fileURLToPath } from 'node:url';

const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/', import.meta.url));

export function fixturesDir(): string {
  return FIXTURES_DIR;
}

/**
 * A sample of examples for the quick run: the first of every resource type and every `nth` one, in the
 * order given (so that a run repeats).
 */
export function everyTypeAndEveryNth<T>(items: readonly T[], typeOf: (item: T) => string, nth: number): T[] {
  const seen = new Set<string>();
  return items.filter((item, i) => {
    const type = typeOf(item);
    const first = !seen.has(type);
    seen.add(type);
    return first || i % nth === 0;
  });
}
