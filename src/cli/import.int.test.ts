// `ambient-fhir import` as an administrator runs it: a summary on stdout, a non-zero exit on failures.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function runImport(dir: string, ...paths: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', 'import', ...paths], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'import.db')}`, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
  });
}

describe('import command', () => {
  it('loads a file, prints the summary and exits 0', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-import-'));
    const file = join(dir, 'Patient.ndjson');
    writeFileSync(
      file,
      `${JSON.stringify({ resourceType: 'Patient', id: 'cli-1' })}\n${JSON.stringify({ resourceType: 'Patient', id: 'cli-2' })}\n`,
    );
    const result = runImport(dir, file);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^Loaded 2 resources from 1 files in [0-9.]+ s \([0-9]+ resources\/s\)\.$/m);
  });

  it('names each failure with its file and line and exits 1', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-import-'));
    const file = join(dir, 'Patient.ndjson');
    writeFileSync(file, `${JSON.stringify({ resourceType: 'Patient', gender: 'robot' })}\n`);
    const result = runImport(dir, file);
    expect(result.status).toBe(1);
    expect(result.stdout).toContain('1 failed:');
    expect(result.stdout).toContain(`${file}:1: 401 Unauthorized`);
    expect(result.stdout).toContain('Patient.gender');
  });

  it('exits 2 without arguments and 1 for a path that does not exist', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-import-'));
    expect(runImport(dir).status).toBe(2);
    const missing = runImport(dir, join(dir, 'nope.ndjson'));
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('nope.ndjson');
  });
});
