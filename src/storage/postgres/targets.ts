// A PostgreSQL URL in libpq's form may name several hosts (`postgres://u@h1:5432,h2:5433/db?
// target_session_attrs=read-write`, https://www.postgresql.org/docs/current/libpq-connect.html
// #LIBPQ-MULTIPLE-HOSTS); node-postgres takes one. This splits such a URL into one URL per host, in
// order, and says which kind of server to pick among them.

/** libpq's values; `primary` and `read-write` both mean "the server that accepts writes" here. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

export interface PostgresTargets {
  /** One connection URL per host, in the order given, without `target_session_attrs`. */
  readonly urls: readonly string[];
  readonly targetSessionAttrs: TargetSessionAttrs;
}

const TARGET_SESSION_ATTRS: readonly string[] = ['any', 'read-write', 'primary'];

/** Throws an Error naming the problem (never echoing a password) when the URL cannot be split. */
export function parsePostgresTargets(url: string): PostgresTargets {
  const match = /^(postgres(?:ql)?:\/\/)([^/?#]*)([/?#].*)?$/.exec(url);
  if (!match) throw new Error('DATABASE_URL is not a postgres:// URL');
  const [, scheme, authority, rest = ''] = match;
  const at = authority.lastIndexOf('@');
  const userInfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = authority.slice(at + 1);
  const hosts = hostList === '' ? [''] : hostList.split(',');
  if (hosts.some((h) => h === '' && hosts.length > 1))
    throw new Error('DATABASE_URL names an empty host in its host list');

  const queryAt = rest.indexOf('?');
  const path = queryAt >= 0 ? rest.slice(0, queryAt) : rest;
  const params = new URLSearchParams(queryAt >= 0 ? rest.slice(queryAt + 1) : '');
  const requested = params.get('target_session_attrs') ?? 'any';
  if (!TARGET_SESSION_ATTRS.includes(requested)) {
    throw new Error(
      `DATABASE_URL's target_session_attrs must be one of ${TARGET_SESSION_ATTRS.join(', ')}, got "${requested}"`,
    );
  }
  params.delete('target_session_attrs');
  const query = params.size > 0 ? `?${params.toString()}` : '';
  return {
    urls: hosts.map((host) => `${scheme}${userInfo}${host}${path}${query}`),
    targetSessionAttrs: requested as TargetSessionAttrs,
  };
}
