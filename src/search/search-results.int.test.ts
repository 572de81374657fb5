// The result side of search on SQLite and PostgreSQL: paging links and keyset cursors (also while
// others write), totals, _include/_revinclude (+:iterate, *), _summary/_elements, unknown parameters
// (lenient vs strict), system search, access (403), and the index following updates and deletes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { BACKENDS } from '../../test/support/databases.js';
import { createSearchTestEnv, principalFor } from '../../test/support/search-env.js';
import type { SearchBundle, SearchTestEnv } from '../../test/support/search-env.js';
import { FIXTURE, TEST_BASE } from '../../test/support/search-fixtures.js';

function linkOf(bundle: SearchBundle, relation: string): string | undefined {
  return bundle.link?.find((l) => l.relation === relation)?.url;
}

function queryOf(url: string): string {
  return new URL(url).search.slice(1);
}

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof AppError) return error.status;
    throw error;
  }
}

describe.each(BACKENDS)('search results on %s', (backend) => {
  let env: SearchTestEnv;

  beforeAll(async () => {
    env = await createSearchTestEnv(backend);
    for (const resource of FIXTURE) await env.store.update(structuredClone(resource));
  });

  afterAll(async () => {
    await env?.dispose();
  });

  describe('paging', () => {
    it('follows next links through every match once, and previous links back', async () => {
      const first = await env.search('Patient', '_count=2');
      expect(env.matchIds(first)).toEqual(['p1', 'p2']);
      expect(linkOf(first, 'previous')).toBeUndefined();
      expect(linkOf(first, 'self')).toBe(`${TEST_BASE}/Patient?_count=2`);
      expect(linkOf(first, 'first')).toBe(`${TEST_BASE}/Patient?_count=2`);
      const second = await env.search('Patient', queryOf(linkOf(first, 'next')!));
      expect(env.matchIds(second)).toEqual(['p3', 'p4']);
      const third = await env.search('Patient', queryOf(linkOf(second, 'next')!));
      expect(env.matchIds(third)).toEqual(['p5', 'p6']);
      expect(linkOf(third, 'next')).toBeUndefined();
      const back = await env.search('Patient', queryOf(linkOf(third, 'previous')!));
      expect(env.matchIds(back)).toEqual(['p3', 'p4']);
      const start = await env.search('Patient', queryOf(linkOf(back, 'previous')!));
      expect(env.matchIds(start)).toEqual(['p1', 'p2']);
      expect(linkOf(start, 'previous')).toBeUndefined();
      expect(linkOf(start, 'next')).toBeDefined();
    });

    it('pages sorted results with ties and missing values deterministically', async () => {
      for (const sort of ['birthdate', '-birthdate', 'gender,-birthdate', 'family', '-gender,_id', '-_lastUpdated']) {
        const all = env.matchIds(await env.search('Patient', `_sort=${sort}&_count=100`));
        const walked: string[] = [];
        let bundle = await env.search('Patient', `_sort=${sort}&_count=2`);
        for (let guard = 0; guard < 10; guard++) {
          walked.push(...env.matchIds(bundle));
          const next = linkOf(bundle, 'next');
          if (!next) break;
          bundle = await env.search('Patient', queryOf(next));
        }
        expect(walked, sort).toEqual(all);
        expect(all).toHaveLength(6);
        // And backwards from the end.
        const backwards: string[] = [];
        for (let guard = 0; guard < 10; guard++) {
          backwards.unshift(...env.matchIds(bundle));
          const previous = linkOf(bundle, 'previous');
          if (!previous) break;
          bundle = await env.search('Patient', queryOf(previous));
        }
        expect(backwards, `${sort} backwards`).toEqual(all);
      }
    });

    it('refuses a tampered cursor and a cursor of another query', async () => {
      const first = await env.search('Patient', '_count=2');
      const next = new URL(linkOf(first, 'next')!);
      const cursor = next.searchParams.get('_cursor')!;
      const [payload, mac] = cursor.split('.');
      const forged = Buffer.from(JSON.stringify([0, 0])).toString('base64url');
      expect(await statusOf(env.search('Patient', `_count=2&_cursor=${forged}.${mac}`))).toBe(400);
      expect(await statusOf(env.search('Patient', `_count=2&_cursor=${payload}.AAAA`))).toBe(400);
      expect(await statusOf(env.search('Patient', `_count=2&_cursor=garbage`))).toBe(400);
      expect(await statusOf(env.search('Patient', `_count=3&_cursor=${cursor}`))).toBe(400);
      expect(await statusOf(env.search('Observation', `_count=2&_cursor=${cursor}`))).toBe(400);
      expect(await statusOf(env.search('Patient', `_count=2&_cursor=${cursor}`))).toBe(200);
    });

    it('visits every resource that exists for the whole walk exactly once while others write', async () => {
      const stable: string[] = [];
      for (let i = 0; i < 30; i++) {
        const id = `walk-${String(i).padStart(2, '0')}`;
        stable.push(id);
        await env.store.update({
          resourceType: 'Basic',
          id,
          code: { text: 'walk' },
          created: `2020-01-${String((i % 28) + 1).padStart(2, '0')}`,
        });
      }
      const transient: string[] = [];
      for (const sort of ['', '&_sort=created', '&_sort=-created']) {
        const seen: string[] = [];
        let bundle = await env.search('Basic', `code:text=walk&_count=4${sort}`);
        for (let page = 0; page < 40; page++) {
          seen.push(...env.matchIds(bundle));
          // Between pages: new resources appear and short-lived ones come and go.
          const extra = `walk-new-${sort}-${page}`;
          transient.push(extra);
          await env.store.update({ resourceType: 'Basic', id: extra, code: { text: 'walk' }, created: '2020-01-15' });
          if (page % 2 === 1) await env.store.delete('Basic', transient[transient.length - 2]);
          const next = linkOf(bundle, 'next');
          if (!next) break;
          bundle = await env.search('Basic', queryOf(next));
        }
        for (const id of stable)
          expect(
            seen.filter((s) => s === id),
            `${id} ${sort}`,
          ).toHaveLength(1);
        expect(new Set(seen).size).toBe(seen.length);
      }
    });

    it('serves _count=0 without entries and caps _count at 1000', async () => {
      const none = await env.search('Patient', '_count=0&_total=accurate');
      expect(none.entry ?? []).toHaveLength(0);
      expect(none.total).toBe(6);
      // Without _total too: _count=0 asks for the total (docs/api.md).
      const totalOnly = await env.search('Patient', '_count=0');
      expect(totalOnly.entry ?? []).toHaveLength(0);
      expect(totalOnly.total).toBe(6);
      expect((await env.search('Patient', '_count=0&gender=female')).total).toBe(
        (await env.search('Patient', 'gender=female&_total=accurate')).total,
      );
      const capped = await env.search('Patient', '_count=5000');
      expect(env.matchIds(capped)).toHaveLength(6);
      expect(linkOf(capped, 'self')).toContain('_count=5000');
      expect(await statusOf(env.search('Patient', '_count=-1'))).toBe(400);
    });
  });

  describe('totals', () => {
    it('counts only when asked or when the whole result is on the first page', async () => {
      expect((await env.search('Patient', '_count=100')).total).toBe(6);
      expect((await env.search('Patient', '_count=2')).total).toBeUndefined();
      expect((await env.search('Patient', '_count=2&_total=accurate')).total).toBe(6);
      expect((await env.search('Patient', '_count=100&_total=none')).total).toBeUndefined();
      const estimate = (await env.search('Patient', '_count=2&_total=estimate')).total;
      expect(typeof estimate).toBe('number');
      const count = await env.search('Patient', 'gender=male&_summary=count');
      expect(count.total).toBe(2);
      expect(count.entry ?? []).toHaveLength(0);
      expect(await statusOf(env.search('Patient', '_total=maybe'))).toBe(400);
    });
  });

  describe('_include and _revinclude', () => {
    const cases: [string, string, string[], string[]][] = [
      ['MedicationRequest', '_id=mr1&_include=MedicationRequest:patient', ['mr1'], ['Patient/p1']],
      ['MedicationRequest', '_include=MedicationRequest:medication', ['mr1', 'mr2'], ['Medication/m1']],
      ['Patient', '_id=p1&_revinclude=Appointment:patient', ['p1'], ['Appointment/a1']],
      ['Patient', '_id=p1,p2&_revinclude=Appointment:patient', ['p1', 'p2'], ['Appointment/a1', 'Appointment/a2']],
      [
        'Observation',
        '_id=obs1&_include=Observation:subject&_include=Observation:performer',
        ['obs1'],
        ['Patient/p1', 'Practitioner/pr1'],
      ],
      ['Encounter', '_id=e2&_include=Encounter:participant:Practitioner', ['e2'], ['Practitioner/pr2']],
      ['Encounter', '_id=e2&_include=Encounter:participant', ['e2'], ['Practitioner/pr2', 'PractitionerRole/prr1']],
      [
        'Encounter',
        '_id=e2&_include=Encounter:participant&_include:iterate=PractitionerRole:organization',
        ['e2'],
        ['Practitioner/pr2', 'PractitionerRole/prr1', 'Organization/o1'],
      ],
      [
        'Patient',
        '_id=p2&_include=Patient:organization&_include:iterate=Organization:partof',
        ['p2'],
        ['Organization/o2', 'Organization/o1'],
      ],
      ['Patient', '_id=p2&_include=Patient:organization&_include=Organization:partof', ['p2'], ['Organization/o2']],
      ['Observation', '_id=obs1&_include=*', ['obs1'], ['Patient/p1', 'Practitioner/pr1']],
      ['Patient', '_id=p1,p4&_revinclude=Patient:link', ['p1', 'p4'], []],
      ['Patient', '_id=p1&_revinclude=Patient:link', ['p1'], ['Patient/p4']],
      [
        'Patient',
        '_id=p1&_revinclude=Encounter:patient&_revinclude=Observation:patient',
        ['p1'],
        ['Encounter/e1', 'Observation/obs1', 'Observation/obs4'],
      ],
      ['Patient', '_id=p5&_revinclude=Encounter:patient', ['p5'], []],
      ['Patient', '_id=p2&_include=Patient:general-practitioner', ['p2'], ['Practitioner/pr2']],
    ];
    it.each(cases)('%s?%s', async (type, query, matches, included) => {
      const bundle = await env.search(type, query);
      expect(env.matchIds(bundle).sort()).toEqual([...matches].sort());
      expect(env.includeIds(bundle).sort()).toEqual([...included].sort());
      const entries = bundle.entry ?? [];
      expect(entries.slice(0, matches.length).every((e) => e.search.mode === 'match')).toBe(true);
    });

    it('never lets includes take the place of matches on a page', async () => {
      const bundle = await env.search(
        'Observation',
        '_count=2&_include=Observation:patient&_include=Observation:performer',
      );
      expect(env.matchIds(bundle)).toEqual(['obs1', 'obs2']);
      expect(env.includeIds(bundle).sort()).toEqual(['Patient/p1', 'Patient/p2', 'Practitioner/pr1']);
      const next = await env.search('Observation', queryOf(linkOf(bundle, 'next')!));
      expect(env.matchIds(next)).toEqual(['obs3', 'obs4']);
      expect(linkOf(bundle, 'self')).toContain('_include=Observation%3Apatient');
    });

    it.each([
      '_include=Observation',
      '_include=Observation:foo',
      '_include=Foo:bar',
      '_include=Observation:code',
      '_include=Observation:subject:Foo',
      '_include=Observation:subject:Practitioner',
      '_include:deep=Observation:subject',
      '_revinclude=*',
    ])('refuses %s', async (query) => {
      expect(await statusOf(env.search('Observation', query))).toBe(400);
    });
  });

  describe('_summary and _elements', () => {
    it('keeps the requested elements and marks the result SUBSETTED', async () => {
      const bundle = await env.search('Patient', '_id=p1&_elements=gender');
      const patient = bundle.entry![0].resource as Record<string, unknown>;
      expect(Object.keys(patient).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
      expect((patient.meta as { tag: { code: string }[] }).tag.map((t) => t.code)).toContain('SUBSETTED');
      const obs = (await env.search('Observation', '_id=obs1&_elements=value')).entry![0].resource as Record<
        string,
        unknown
      >;
      // value[x] matches valueQuantity; status and code are mandatory and always come back.
      expect(Object.keys(obs).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status', 'valueQuantity']);
    });

    it('_summary=true keeps the summary elements only', async () => {
      const obs = (await env.search('Observation', '_id=obs1&_summary=true')).entry![0].resource as Record<
        string,
        unknown
      >;
      expect(obs.code).toBeDefined();
      expect(obs.valueQuantity).toBeDefined();
      expect(obs.category).toBeUndefined();
      const text = (await env.search('Observation', '_id=obs1&_summary=text')).entry![0].resource as Record<
        string,
        unknown
      >;
      expect(Object.keys(text).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status']);
      const data = (await env.search('Observation', '_id=obs1&_summary=data')).entry![0].resource as Record<
        string,
        unknown
      >;
      expect(data.category).toBeDefined();
      const full = (await env.search('Observation', '_id=obs1&_summary=false')).entry![0].resource as Record<
        string,
        unknown
      >;
      expect((full.meta as { tag?: unknown }).tag).toBeUndefined();
      expect(await statusOf(env.search('Observation', '_summary=maybe'))).toBe(400);
      expect(await statusOf(env.search('Observation', '_summary=true&_elements=code'))).toBe(400);
    });
  });

  describe('unknown and unsupported parameters', () => {
    it('ignores them by default, says so in an outcome entry and leaves them out of the links', async () => {
      const bundle = await env.search('Patient', 'foo=bar&gender=male&_text=smith&_count=100');
      expect(env.matchIds(bundle).sort()).toEqual(['p1', 'p4']);
      const outcome = bundle.entry!.find((e) => e.search.mode === 'outcome')!.resource as unknown as {
        issue: { severity: string; diagnostics: string; expression: string[] }[];
      };
      expect(outcome.issue.map((i) => i.expression[0]).sort()).toEqual(['_text', 'foo']);
      expect(outcome.issue.every((i) => i.severity === 'warning')).toBe(true);
      expect(linkOf(bundle, 'self')).toBe(`${TEST_BASE}/Patient?gender=male&_count=100`);
    });

    it('refuses them with Prefer: handling=strict', async () => {
      expect(await statusOf(env.search('Patient', 'foo=bar', { strict: true }))).toBe(400);
      expect(await statusOf(env.search('Patient', '_content=x', { strict: true }))).toBe(400);
      expect(await statusOf(env.search('Observation', 'patient.foo=x', { strict: true }))).toBe(400);
      expect(await statusOf(env.search('Patient', '_sort=foo', { strict: true }))).toBe(400);
      expect(await statusOf(env.search('Patient', 'gender=male', { strict: true }))).toBe(200);
    });

    it('ignores an empty value', async () => {
      const bundle = await env.search('Patient', 'name=&_count=100');
      expect(env.matchIds(bundle)).toHaveLength(6);
    });

    it('answers 400 for invalid values and modifiers in both modes', async () => {
      for (const strict of [false, true]) {
        expect(await statusOf(env.search('Patient', 'birthdate=soon', { strict }))).toBe(400);
        expect(await statusOf(env.search('Patient', 'gender:fuzzy=male', { strict }))).toBe(400);
        expect(await statusOf(env.search('Patient', 'name:=x', { strict }))).toBe(400);
      }
    });
  });

  describe('system search', () => {
    it('searches several types with the parameters they share', async () => {
      const bundle = await env.search(undefined, '_type=Patient,Practitioner&_tag=a&_count=100');
      expect(env.matchIds(bundle, true).sort()).toEqual(['Patient/p1', 'Patient/p4']);
      const byName = await env.search(undefined, '_type=Patient,Practitioner&name=house');
      expect(env.matchIds(byName, true)).toEqual(['Practitioner/pr1']);
      const byId = await env.search(undefined, '_id=p1,pr1,o1&_count=100');
      expect(env.matchIds(byId, true).sort()).toEqual(['Organization/o1', 'Patient/p1', 'Practitioner/pr1']);
      expect(linkOf(byId, 'self')).toBe(`${TEST_BASE}?_id=p1%2Cpr1%2Co1&_count=100`);
      const sorted = await env.search(undefined, '_type=Patient,Practitioner&_sort=-_id&name=h,s');
      expect(env.matchIds(sorted, true)).toEqual(['Practitioner/pr1', 'Patient/p6', 'Patient/p2', 'Patient/p1']);
    });

    it('reports a parameter that not every type has, and refuses unknown types', async () => {
      expect(await statusOf(env.search(undefined, '_type=Patient,Observation&name=x', { strict: true }))).toBe(400);
      expect(await statusOf(env.search(undefined, '_type=Foo'))).toBe(400);
      expect(await statusOf(env.search('Patient', '_type=Patient'))).toBe(400);
    });
  });

  describe('access', () => {
    const patientsOnly = principalFor(['Patient']);
    it.each([
      ['Observation', 'code=x', 403],
      ['Patient', 'name=smith', 200],
      ['Patient', '_has:Observation:patient:code=x', 403],
      ['Patient', 'general-practitioner.name=x', 403],
      ['Patient', 'link.name=smith', 403],
      ['Patient', 'link:Patient.name=smith', 200],
      ['Patient', '_include=Patient:general-practitioner', 403],
      ['Patient', '_revinclude=Observation:patient', 403],
      ['Patient', '_revinclude=Patient:link', 200],
    ] as const)('%s?%s → %i', async (type, query, status) => {
      expect(await statusOf(env.search(type, query, { principal: patientsOnly }))).toBe(status);
    });

    it('limits a system search without _type to the types the caller may search', async () => {
      const bundle = await env.search(undefined, '_id=p1,pr1&_count=100', { principal: patientsOnly });
      expect(env.matchIds(bundle, true)).toEqual(['Patient/p1']);
      expect(await statusOf(env.search(undefined, '_type=Practitioner', { principal: patientsOnly }))).toBe(403);
    });
  });

  describe('index maintenance', () => {
    it('follows updates and deletes', async () => {
      await env.store.update({
        resourceType: 'Patient',
        id: 'tmp1',
        name: [{ family: 'Ephemeral' }],
        gender: 'female',
      });
      expect(env.matchIds(await env.search('Patient', 'name=ephemeral'))).toEqual(['tmp1']);
      await env.store.update({
        resourceType: 'Patient',
        id: 'tmp1',
        name: [{ family: 'Permanent' }],
        gender: 'female',
      });
      expect(env.matchIds(await env.search('Patient', 'name=ephemeral'))).toEqual([]);
      expect(env.matchIds(await env.search('Patient', 'name=permanent'))).toEqual(['tmp1']);
      await env.store.delete('Patient', 'tmp1');
      expect(env.matchIds(await env.search('Patient', 'name=permanent'))).toEqual([]);
      expect(env.matchIds(await env.search('Patient', '_id=tmp1'))).toEqual([]);
      const rows = await env.db.query<{ n: number }>(
        `SELECT (SELECT COUNT(*) FROM idx_string WHERE pk = r.pk) + (SELECT COUNT(*) FROM idx_token WHERE pk = r.pk) AS n FROM resource r WHERE r.type = 'Patient' AND r.id = 'tmp1'`,
      );
      expect(Number(rows[0].n)).toBe(0);
      // Created again after the delete: found again.
      await env.store.update({ resourceType: 'Patient', id: 'tmp1', name: [{ family: 'Again' }] });
      expect(env.matchIds(await env.search('Patient', 'name=again'))).toEqual(['tmp1']);
      await env.store.delete('Patient', 'tmp1');
    });
  });
});
