// Real PostgreSQL servers that a test starts and stops itself: a primary and streaming standbys
// (`initdb`, `pg_basebackup -R`, `pg_ctl promote`), each in a temporary folder on a port of its own,
// from the PostgreSQL installed on the machine (Debian's /usr/lib/postgresql/<version>/bin). The
// replication and failover suites skip, saying why, where those programs are missing. PostgreSQL
// refuses to run as root: as root, the programs run as the `postgres` user.
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const PROGRAMS = ['initdb', 'pg_ctl', 'pg_basebackup', 'postgres'];

/** The folder of the machine's PostgreSQL programs (the newest version), or undefined. */
export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const bin = join(root, version, 'bin');
    if (PROGRAMS.every((p) => existsSync(join(bin, p)))) return bin;
  }
  return undefined;
}

/** Why the real-server suites cannot run here, or undefined when they can. */
export function postgresServersUnavailable(): string | undefined {
  if (!postgresBinDir())
    return `no PostgreSQL programs (${PROGRAMS.join(', ')}) under /usr/lib/postgresql/<version>/bin`;
  if (process.getuid?.() === 0) {
    try {
      execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
    } catch {
      return 'running as root without a postgres user to run PostgreSQL as';
    }
  }
  return undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface PgServer {
  readonly port: number;
  readonly dir: string;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  /** `pg_ctl stop`: fast (clean) or immediate (as a crash: no shutdown checkpoint). */
  stop(mode?: 'fast' | 'immediate'): void;
  /** `pg_ctl promote`: a standby becomes a primary. */
  promote(): void;
}

function run(program: string, args: string[]): void {
  const bin = join(postgresBinDir()!, program);
  const asPostgres = process.getuid?.() === 0;
  execFileSync(asPostgres ? 'runuser' : bin, asPostgres ? ['-u', 'postgres', '--', bin, ...args] : args, {
    stdio: 'pipe',
    timeout: 60_000,
  });
}

function newDir(): string {
  const base = mkdtempSync(join(tmpdir(), 'ambient-pg-'));
  const dir = join(base, 'data');
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(base, uid, gid);
  }
  chmodSync(base, 0o755);
  return dir;
}

function server(dir: string, port: number): PgServer {
  let stopped = false;
  return {
    port,
    dir,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop(mode = 'fast') {
      if (stopped) return;
      stopped = true;
      run('pg_ctl', ['-D', dir, '-m', mode, '-w', 'stop']);
    },
    promote() {
      run('pg_ctl', ['-D', dir, '-w', 'promote']);
    },
  };
}

function start(dir: string): void {
  run('pg_ctl', ['-D', dir, '-l', join(dir, '..', 'server.log'), '-w', '-t', '60', 'start']);
}

/** Whether the machine's PostgreSQL has the pg_stat_statements module (Debian ships it with the server). */
export function statementStatsAvailable(): boolean {
  const bin = postgresBinDir();
  return bin !== undefined && existsSync(join(bin, '..', 'lib', 'pg_stat_statements.so'));
}

/**
 * A primary ready for streaming replication. `statementStats`: pg_stat_statements loaded, here and in
 * every standby copied from it, so a test can count the statements each server ran (the extension's view
 * is created on the primary, and reaches the standbys by replication).
 */
export async function startPrimary(options: { statementStats?: boolean } = {}): Promise<PgServer> {
  const port = await freePort();
  const dir = newDir();
  run('initdb', ['-D', dir, '-U', 'postgres', '--auth=trust', '--no-sync']);
  const settings = [
    `port = ${port}`,
    `listen_addresses = '127.0.0.1'`,
    `unix_socket_directories = '${join(dir, '..')}'`,
    'wal_level = replica',
    'max_wal_senders = 8',
    'hot_standby = on',
    'fsync = on',
    'shared_buffers = 16MB',
    ...(options.statementStats ? [`shared_preload_libraries = 'pg_stat_statements'`] : []),
  ];
  appendFileSync(join(dir, 'postgresql.conf'), `\n${settings.join('\n')}\n`);
  start(dir);
  return server(dir, port);
}

/**
 * A streaming standby of `primary` (pg_basebackup -R), read-only until promoted. `synchronous`: from
 * then on every commit on the primary waits until this standby has it (synchronous_standby_names), so
 * no acknowledged write is lost with the primary. Set on the primary after the copy, so that the
 * standby, once promoted, does not wait for a standby of its own.
 */
export async function startStandby(primary: PgServer, options: { synchronous?: boolean } = {}): Promise<PgServer> {
  const port = await freePort();
  const dir = newDir();
  run('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    dir,
    '-R',
    '-X',
    'stream',
  ]);
  appendFileSync(
    join(dir, 'postgresql.auto.conf'),
    `\nport = ${port}\nunix_socket_directories = '${join(dir, '..')}'\n`,
  );
  start(dir);
  if (options.synchronous) {
    const client = new pg.Client({ connectionString: primary.url });
    await client.connect();
    try {
      await client.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
      await client.query('SELECT pg_reload_conf()');
    } finally {
      await client.end();
    }
  }
  return server(dir, port);
}

/** Stops the servers (immediately) and removes their folders. */
export function removeServers(servers: readonly (PgServer | undefined)[]): void {
  for (const s of servers) {
    if (!s) continue;
    try {
      s.stop('immediate');
    } catch {
      // Already stopped.
    }
    rmSync(join(s.dir, '..'), { recursive: true, force: true });
  }
}

export interface Pooler {
  readonly port: number;
  stop(): void;
}

/** Whether PgBouncer (Debian's package `pgbouncer`) is installed, or why the pooler suite cannot run. */
export function pgbouncerUnavailable(): string | undefined {
  if (!existsSync('/usr/sbin/pgbouncer')) return 'no /usr/sbin/pgbouncer (Debian package pgbouncer)';
  return postgresServersUnavailable();
}

/**
 * PgBouncer in transaction pooling mode in front of one database of a PostgreSQL server, with few server
 * connections (`serverConnections`) so that consecutive transactions of one client land on different
 * server connections. It refuses to run as root: as root it runs as the `postgres` user.
 */
export async function startPgbouncer(target: URL, database: string, serverConnections = 2): Promise<Pooler> {
  const port = await freePort();
  const dir = join(newDir(), '..');
  const user = decodeURIComponent(target.username || 'postgres');
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database} user=${user}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${serverConnections}`,
      'max_client_conn = 500',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  const asPostgres = process.getuid?.() === 0;
  if (asPostgres) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  const args = ['-d', join(dir, 'pgbouncer.ini')];
  execFileSync(
    asPostgres ? 'runuser' : '/usr/sbin/pgbouncer',
    asPostgres ? ['-u', 'postgres', '--', '/usr/sbin/pgbouncer', ...args] : args,
    {
      stdio: 'pipe',
      timeout: 30_000,
    },
  );
  return {
    port,
    stop() {
      try {
        const pid = Number(readFileSync(join(dir, 'pgbouncer.pid'), 'utf8').trim());
        process.kill(pid, 'SIGINT');
      } catch {
        // Already gone.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
