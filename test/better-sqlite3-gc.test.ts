// better-sqlite3 12 compiled against the headers of Node 24.19 or later aborts the process
// (`Assertion failed: (env) != nullptr`) when the garbage collector frees a statement from a task rather
// than from JavaScript, as V8's idle-time collection does in a running server. The child asks for such a
// collection (an asynchronous major GC runs as a task) after dropping many statements, keeps some alive
// until it exits, and must exit cleanly every time; .ci/run builds better-sqlite3 so that it does.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { expect, it } from 'vitest';

const RUNS = 5;

const CHILD = `
const Database = require(process.argv[1]);
const db = new Database(':memory:');
db.exec('CREATE TABLE t (a INTEGER)');
const kept = [];
for (let i = 0; i < 5000; i++) {
  const statement = db.prepare('SELECT a + ' + i + ' FROM t');
  statement.all();
  if (i % 100 === 0) kept.push(statement);
}
gc({ type: 'major', execution: 'async' }).then(() => { globalThis.kept = kept; });
`;

it('frees better-sqlite3 statements in a collection run as a task without aborting', () => {
  const betterSqlite3 = createRequire(import.meta.url).resolve('better-sqlite3');
  for (let run = 0; run < RUNS; run++) {
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', CHILD, betterSqlite3], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect({ status: child.status, signal: child.signal, stderr: child.stderr }).toEqual({
      status: 0,
      signal: null,
      stderr: '',
    });
  }
});
