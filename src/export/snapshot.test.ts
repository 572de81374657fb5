import { describe, expect, it } from 'vitest';
import { postgresDialect, sqliteDialect } from '../storage/sql/dialect.js';
import { raw } from '../search/sql/fragment.js';
import { pageQuery, rowContent, versionAtQuery, versionContent } from './snapshot.js';

const window = { until: 1000, since: 500 };

describe('rowContent', () => {
  it('exports a current row as it is, and looks up the version of a row changed after transactionTime', () => {
    expect(rowContent({ pk: 1, last_updated: 900, deleted: 0, content: '{"a":1}' }, window)).toBe('{"a":1}');
    expect(rowContent({ pk: 1, last_updated: '1000', deleted: 0, content: 'x' }, window)).toBe('x');
    expect(rowContent({ pk: 1, last_updated: 1001, deleted: 0, content: 'x' }, window)).toBe('history');
    expect(rowContent({ pk: 1, last_updated: 1001, deleted: 1, content: null }, window)).toBe('history');
    expect(rowContent({ pk: 1, last_updated: 900, deleted: 1, content: null }, window)).toBeUndefined();
  });

  it('looks up in history a current row whose content the page statement left out as too large', () => {
    const large = { pk: 1, last_updated: 900, deleted: 0, content: null, content_bytes: 70_000 };
    expect(rowContent(large, window)).toBe('history');
    expect(rowContent({ ...large, content: 'x', content_bytes: 1 }, window)).toBe('x');
    expect(rowContent({ ...large, deleted: 1, content_bytes: null }, window)).toBeUndefined();
  });
});

describe('versionContent', () => {
  it('leaves out what did not exist, was deleted or did not change after _since', () => {
    expect(versionContent(undefined, window)).toBeUndefined();
    expect(versionContent({ last_updated: 900, operation: 'delete', content: null }, window)).toBeUndefined();
    expect(versionContent({ last_updated: 400, operation: 'update', content: 'x' }, window)).toBeUndefined();
    expect(versionContent({ last_updated: 400, operation: 'update', content: 'x' }, { until: 1000 })).toBe('x');
    expect(versionContent({ last_updated: '900', operation: 'create', content: 'x' }, window)).toBe('x');
  });
});

describe('pageQuery', () => {
  it('walks one type by pk after a keyset position, bound values only', () => {
    const page = pageQuery(sqliteDialect, 'Patient', raw('r0.id = r0.id'), window, 42, 10);
    expect(page.text).toBe(
      'SELECT r0.pk, r0.last_updated, r0.deleted, CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version FROM resource r0 WHERE (r0.type = ? AND r0.pk > ? AND ((r0.deleted = 0 AND r0.last_updated > ?) OR r0.last_updated > ?) AND r0.id = r0.id) ORDER BY r0.pk LIMIT ?',
    );
    expect(page.params).toEqual([65536, 'Patient', 42, 500, 1000, 10]);
    expect(pageQuery(postgresDialect, 'Patient', undefined, { until: 1000 }, 0).text).toMatch(
      /^\/\*adhoc\*\/ SELECT .* WHERE \(r0\.type = \? AND r0\.pk > \? AND \(r0\.deleted = 0 OR r0\.last_updated > \?\) AND 1=1\) ORDER BY r0\.pk LIMIT \?$/,
    );
  });

  it('reads the version at transactionTime as the latest history row not after it', () => {
    const statement = versionAtQuery(7, 1000);
    expect(statement.text).toContain('WHERE pk = ? AND last_updated <= ? ORDER BY version DESC LIMIT 1');
    expect(statement.params).toEqual([7, 1000]);
  });
});
