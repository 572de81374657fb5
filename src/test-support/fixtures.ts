/**
 * Where the shared test fixtures live: AMBIENT_FIXTURES when set, else `../shared/fixtures` beside the
 * repository, else the workplace's `/work/shared/fixtures` (a clone checked out elsewhere, as CI may
 * do). Tests read fixtures in place; they are never copied into the repository.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const WORKPLACE_FIXTURES = '/work/shared/fixtures';

export function fixturesDir(): string {
  if (process.env.AMBIENT_FIXTURES) return process.env.AMBIENT_FIXTURES;
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const beside = join(repoRoot, '..', 'shared', 'fixtures');
  return existsSync(beside) || !existsSync(WORKPLACE_FIXTURES) ? beside : WORKPLACE_FIXTURES;
}
