// OR lists of equality values bound as one parameter (Dialect.equalsAny: a JSON array on SQLite, text
// arrays on PostgreSQL), over HTTP with a read-only token on both databases: values that mean something
// to those encodings (quotes, backslashes, braces, commas, `NULL`, JSON, non-ASCII) match exactly
// themselves, and long lists of decoys change nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../../test/support/databases.js';
import { startTestApp } from '../../test/support/test-app.js';
import type { TestApp } from '../../test/support/test-app.js';
import type { FhirClient } from '../../test/support/fhir-client.js';

type Bundle = { total?: number; entry?: { resource: { resourceType: string; id: string } }[] };

/** Codes an array literal or a JSON array could misread, each stored on an Observation of its own. */
const AWKWARD = ['a"b', 'c\\d', '{e}', 'NULL', 'f,g', '["h"]', 'i j', 'ü€😀', "k'l", 'm|n'];
/** Codes around an index key's length (tables.ts INDEX_KEY_LENGTH, 256): one exactly that long, two longer with its key. */
const KEY = 'K'.repeat(255) + 'ü';
const LONG = [KEY, `${KEY}tail`, `${KEY}other`];
const ALL = [...AWKWARD, ...LONG];
/** How a code is written in a search value: `\`, `,`, `|` and `$` escaped (FHIR search escaping). */
const escaped = (code: string) => code.replace(/[\\,|$]/g, (c) => `\\${c}`);

describe.each(BACKENDS)('OR lists bound as one parameter on %s', (backend) => {
  let t: TestApp;
  let writer: FhirClient;
  let reader: FhirClient;
  const byCode = new Map<string, string>();
  let patients: string[] = [];

  const search = async (path: string, query: string): Promise<string[]> => {
    const res = await reader.postForm(`/fhir/${path}/_search`, `${query}&_count=100`);
    expect(res.statusCode, res.body).toBe(200);
    return ((res.json() as Bundle).entry ?? []).map((e) => `${e.resource.resourceType}/${e.resource.id}`).sort();
  };
  const create = async (resource: { resourceType: string; [k: string]: unknown }): Promise<string> => {
    const res = await writer.create(resource);
    expect(res.statusCode, res.body).toBe(201);
    // A create-only token gets no body back: the id is in the Location.
    return /\/([^/]+)\/_history\//.exec(String(res.headers.location))![1];
  };
  const decoys = (n: number, prefix: string) => Array.from({ length: n }, (_, k) => `${prefix}${k}`);

  beforeAll(async () => {
    t = await startTestApp(backend);
    writer = await t.client('system/Observation.c system/Patient.c');
    reader = await t.client('system/Observation.s system/Patient.s');
    patients = [
      await create({ resourceType: 'Patient', name: [{ family: 'Ängel' }] }),
      await create({ resourceType: 'Patient', name: [{ family: 'angel' }] }),
    ];
    for (const [i, code] of ALL.entries()) {
      byCode.set(
        code,
        await create({
          resourceType: 'Observation',
          status: 'final',
          code: { coding: [{ system: `http://s/${i % 2}`, code }] },
          subject: { reference: `Patient/${patients[i % 2]}` },
        }),
      );
    }
  }, 120_000);

  afterAll(async () => {
    await t?.close();
  });

  it('matches awkward codes exactly, bare and with their system, among 500 decoys', async () => {
    const wanted = AWKWARD.filter((_, i) => i % 3 !== 2);
    const expected = wanted.map((code) => `Observation/${byCode.get(code)}`).sort();
    const bare = [...decoys(500, 'NULL'), ...wanted].map(escaped).join(',');
    expect(await search('Observation', `code=${encodeURIComponent(bare)}`)).toEqual(expected);
    const pairs = [
      ...decoys(500, 'x').map((d) => `http://s/0|${d}`),
      ...wanted.map((code) => `http://s/${AWKWARD.indexOf(code) % 2}|${escaped(code)}`),
    ].join(',');
    expect(await search('Observation', `code=${encodeURIComponent(pairs)}`)).toEqual(expected);
    // A code with the other system does not match: the pair is compared as a pair.
    const swapped = wanted.map((code) => `http://s/${(AWKWARD.indexOf(code) + 1) % 2}|${escaped(code)}`).join(',');
    expect(await search('Observation', `code=${encodeURIComponent(swapped)}`)).toEqual([]);
    // `system|` (any code of the system), several of them.
    const systems = await search('Observation', `code=${encodeURIComponent('http://s/1|,http://none|')}`);
    expect(systems).toEqual(
      ALL.filter((_, i) => i % 2 === 1)
        .map((code) => `Observation/${byCode.get(code)}`)
        .sort(),
    );
  });

  it('matches codes longer than an index key by their whole value, in lists', async () => {
    const id = (code: string) => `Observation/${byCode.get(code)}`;
    const system = (code: string) => `http://s/${ALL.indexOf(code) % 2}`;
    const wanted = [LONG[0], LONG[1]];
    const bare = [...decoys(300, `${KEY}x`), ...wanted, 'a"b'].join(',');
    expect(await search('Observation', `code=${encodeURIComponent(bare)}`)).toEqual(
      [...wanted.map(id), id('a"b')].sort(),
    );
    const pairs = [...decoys(300, `http://s/0|${KEY}`), ...wanted.map((code) => `${system(code)}|${code}`)].join(',');
    expect(await search('Observation', `code=${encodeURIComponent(pairs)}`)).toEqual(wanted.map(id).sort());
  });

  it('matches :exact and :not lists of strings', async () => {
    const exact = [...decoys(300, 'Ängel'), 'Ängel'].join(',');
    expect(await search('Patient', `name:exact=${encodeURIComponent(exact)}`)).toEqual([`Patient/${patients[0]}`]);
    // :not compares normalised text: `angel` is `Ängel` too, so neither Patient is left.
    expect(
      await search('Patient', `family:not=${encodeURIComponent([...decoys(300, 'z'), 'ANGEL'].join(','))}`),
    ).toEqual([]);
    expect(await search('Patient', `family:not=${decoys(300, 'z').join(',')}`)).toEqual(
      patients.map((p) => `Patient/${p}`).sort(),
    );
  });

  it('matches reference ids, typed references and _id lists among decoys', async () => {
    const ofFirst = ALL.filter((_, i) => i % 2 === 0)
      .map((code) => `Observation/${byCode.get(code)}`)
      .sort();
    const all = [...byCode.values()].map((id) => `Observation/${id}`).sort();
    expect(await search('Observation', `subject=${[...decoys(300, 'p'), patients[0]].join(',')}`)).toEqual(ofFirst);
    expect(
      await search('Observation', `subject=${[...decoys(300, 'Patient/p'), `Patient/${patients[0]}`].join(',')}`),
    ).toEqual(ofFirst);
    expect(await search('Observation', `subject:Patient=${patients.join(',')}`)).toEqual(all);
    expect(
      await search('Observation', `subject=${[`Group/${patients[0]}`, `Group/${patients[1]}`].join(',')}`),
    ).toEqual([]);
    const someIds = [byCode.get('a"b')!, byCode.get('NULL')!];
    expect(await search('Observation', `_id=${[...decoys(300, 'o'), ...someIds].join(',')}`)).toEqual(
      someIds.map((id) => `Observation/${id}`).sort(),
    );
    expect(await search('Patient', `_id=${patients.join(',')}`)).toEqual(patients.map((id) => `Patient/${id}`).sort());
  });
});
