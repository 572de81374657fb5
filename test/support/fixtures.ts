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
