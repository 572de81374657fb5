/**
 * Where the shared test fixtures live: `../shared/fixtures` beside the repository, unless AMBIENT_FIXTURES names
 * another folder. Tests read fixtures in place; they are never copied into the repository.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export function fixturesDir(): string {
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  return process.env.AMBIENT_FIXTURES ?? join(repoRoot, '..', 'shared', 'fixtures');
}
