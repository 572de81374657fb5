// Every difference between SQLite and PostgreSQL SQL that the rest of the code needs, in one object.

export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** Column type of an auto-incrementing 64-bit primary key. */
  readonly autoIncrementPrimaryKey: string;
  /** 64-bit integer column type. */
  readonly bigint: string;
  /** Suffix that locks the selected rows until the end of the transaction (none on SQLite: writers are serialised). */
  readonly forUpdate: string;
  /** Rewrites `?` placeholders into the backend's form. */
  placeholders(sql: string): string;
  /** Case-insensitive LIKE operator. */
  readonly ilike: string;
}

export const sqliteDialect: Dialect = {
  name: 'sqlite',
  autoIncrementPrimaryKey: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  bigint: 'INTEGER',
  forUpdate: '',
  placeholders: (sql) => sql,
  ilike: 'LIKE',
};

export const postgresDialect: Dialect = {
  name: 'postgres',
  autoIncrementPrimaryKey: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY',
  bigint: 'BIGINT',
  forUpdate: ' FOR UPDATE',
  placeholders: (sql) => {
    let n = 0;
    return sql.replace(/\?/g, () => `$${++n}`);
  },
  ilike: 'ILIKE',
};
