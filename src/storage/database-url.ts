// What DATABASE_URL names, read without opening anything (and without loading a database driver: every
// command reads it, and most never open a database).
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { redactUrl } from '../config.js';

/** `sqlite:./data/ambient.db`, `sqlite:///abs/path.db` or `sqlite::memory:` → the file name better-sqlite3 opens. */
export function sqliteFileName(databaseUrl: string): string {
  const rest = databaseUrl.replace(/^sqlite:/, '');
  if (rest === ':memory:') return ':memory:';
  return rest.startsWith('//') ? rest.slice(2) : rest;
}

/**
 * The database DATABASE_URL names, as start-up lines and commands name it: a SQLite file by its absolute
 * path (a relative one depends on the directory the command ran in), a PostgreSQL URL without its
 * password; `new` when the SQLite file does not exist yet (opening it creates it, empty).
 */
export function databaseLabel(databaseUrl: string): { label: string; new: boolean } {
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    return { label: redactUrl(databaseUrl), new: false };
  }
  const file = sqliteFileName(databaseUrl);
  if (file === ':memory:') return { label: 'sqlite::memory:', new: true };
  const path = resolve(file);
  return { label: `sqlite:${path}`, new: !existsSync(path) };
}
