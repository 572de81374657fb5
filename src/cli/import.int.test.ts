// `ambient-fhir import` as an administrator runs it: a summary on stdout, a non-zero exit on failures.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresTestDatabase } from '../../test/support/databases.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function runImport(dir: string, ...paths: string[]) {
  return importInto(`sqlite:${join(dir, 'import.db')}`, ...paths);
}

function importInto(databaseUrl: string, ...paths: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', 'import', ...paths], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' },
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

  it('leaves PostgreSQL with fresh planner statistics, so searches right after a load plan well', async () => {
    const database = await postgresTestDatabase();
    try {
      const dir = mkdtempSync(join(tmpdir(), 'ambient-cli-import-'));
      const file = join(dir, 'Patient.ndjson');
      writeFileSync(file, `${JSON.stringify({ resourceType: 'Patient', id: 'stats-1', gender: 'female' })}\n`);
      expect(importInto(database.url, file).status).toBe(0);
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ relname: string; analyzed: boolean; vacuumed: boolean }>(
          `SELECT relname, last_analyze IS NOT NULL AS analyzed, last_vacuum IS NOT NULL AS vacuumed
             FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname IN ('resource', 'idx_token')
             ORDER BY relname`,
        );
        expect(rows).toEqual([
          { relname: 'idx_token', analyzed: true, vacuumed: true },
          { relname: 'resource', analyzed: true, vacuumed: true },
        ]);
      } finally {
        await client.end();
      }
    } finally {
      await database.dispose();
    }
  });
});
