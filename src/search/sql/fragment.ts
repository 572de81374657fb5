// The SQL builder: a statement is a tree of fragments, each holding its text with `?` placeholders and
// its bound values, so no value ever enters SQL text (the style notes principle 7). `sql` is a tagged template:
// interpolated values become placeholders, interpolated fragments are spliced in with their values.
import type { SqlValue } from '../../storage/sql/database.js';
import type { Dialect } from '../../storage/sql/dialect.js';

export class Sql {
  constructor(
    readonly text: string,
    readonly params: readonly SqlValue[],
  ) {}

  static readonly empty = new Sql('', []);

  get isEmpty(): boolean {
    return this.text === '';
  }
}

export function sql(strings: TemplateStringsArray, ...values: (SqlValue | Sql)[]): Sql {
  let text = strings[0];
  const params: SqlValue[] = [];
  values.forEach((value, i) => {
    if (value instanceof Sql) {
      text += value.text;
      params.push(...value.params);
    } else {
      text += '?';
      params.push(value);
    }
    text += strings[i + 1];
  });
  return new Sql(text, params);
}

/** Trusted SQL text (identifiers and keywords chosen by the code, never by the request). */
export function raw(text: string): Sql {
  return new Sql(text, []);
}

export function join(parts: readonly Sql[], separator: string): Sql {
  const kept = parts.filter((p) => !p.isEmpty);
  return new Sql(
    kept.map((p) => p.text).join(separator),
    kept.flatMap((p) => p.params),
  );
}

/**
 * `a OP b OP c`, grouped as a balanced tree when long: SQLite refuses expressions nested more than
 * 1,000 deep, and a flat chain of 500 ORs is parsed as a chain 500 deep.
 */
function combine(parts: readonly Sql[], op: 'AND' | 'OR'): Sql {
  if (parts.length <= 16) return sql`(${join(parts, ` ${op} `)})`;
  const half = Math.ceil(parts.length / 2);
  return sql`(${combine(parts.slice(0, half), op)} ${raw(op)} ${combine(parts.slice(half), op)})`;
}

/** `(a AND b)`; TRUE for no parts. */
export function and(parts: readonly Sql[]): Sql {
  const kept = parts.filter((p) => !p.isEmpty);
  if (kept.length === 0) return raw('1=1');
  if (kept.length === 1) return kept[0];
  return combine(kept, 'AND');
}

/** `(a OR b)`; FALSE for no parts. */
export function or(parts: readonly Sql[]): Sql {
  const kept = parts.filter((p) => !p.isEmpty);
  if (kept.length === 0) return raw('1=0');
  if (kept.length === 1) return kept[0];
  return combine(kept, 'OR');
}

/**
 * `(?, ?, ?)` for an IN list of values the code chooses (parameter ids, resource types: as many texts as
 * the definitions allow). A request's values go through `equalsAny`, whose text does not grow with them.
 */
export function list(values: readonly SqlValue[]): Sql {
  return new Sql(`(${values.map(() => '?').join(', ')})`, [...values]);
}

/**
 * `columns` equal to one of `rows` (one text per column): `c = ?` (`(c1 = ? AND c2 = ?)`) for one row,
 * else the dialect's list bound as one parameter (Dialect.equalsAny), so that a search's text is the
 * same whatever the length of its OR lists and the database keeps one prepared statement for them all.
 */
export function equalsAny(d: Dialect, columns: readonly string[], rows: readonly (readonly string[])[]): Sql {
  if (rows.length === 1) return and(columns.map((column, i) => sql`${raw(column)} = ${rows[0][i]}`));
  const list = d.equalsAny(columns, rows);
  return new Sql(list.sql, list.params);
}

/**
 * The same condition over another table alias: handlers write their row conditions over alias `t`;
 * composites and joins need several aliases. Safe because fragment text never holds request values
 * (they are all bound parameters), only our column names.
 */
export function withAlias(fragment: Sql, alias: string): Sql {
  return new Sql(fragment.text.replace(/\bt\./g, `${alias}.`), fragment.params);
}
