// Templates as an administrator manages them: the `template` command (in-process, with its own stdin and
// stdout) and the store behind it, on both databases; a running server sees each change on its next
// request, and the built-in generator fills a custom template by its section titles.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTemplateCommand, parseSectionOption } from '../src/cli/template.js';
import { scribeClient, TEMPLATES } from './support/scribe-client.js';
import { TemplateError, TemplateStore } from '../src/scribe/templates.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: () => any;
}

describe('parseSectionOption', () => {
  it('splits the title from the guidance at the first ": "', () => {
    expect(parseSectionOption('Plan: Tests: labs, imaging')).toEqual({
      title: 'Plan',
      guidance: 'Tests: labs, imaging',
    });
    expect(parseSectionOption('Goals')).toEqual({ title: 'Goals', guidance: '' });
    expect(parseSectionOption('Goals:')).toEqual({ title: 'Goals', guidance: '' });
    expect(() => parseSectionOption(': nothing')).toThrow(/needs a title/);
  });
});

describe.each(BACKENDS)('templates on %s', (backend) => {
  let t: TestApp;
  let db: SqlDatabase;

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_SCRIBE_POLL_MS: '20' });
    db = openDatabase(t.database.url);
  });
  afterAll(async () => {
    await db?.close();
    await t?.close();
  });

  const run = async (args: string[], stdin = ''): Promise<Run> => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdin: Readable.from(stdin === '' ? [] : [stdin]),
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env: { DATABASE_URL: t.database.url },
    };
    const code = await createTemplateCommand(io).run(args);
    return { code, stdout, stderr, json: () => JSON.parse(stdout) };
  };

  const apiTemplates = async () => {
    const res = await (await t.client()).get(TEMPLATES);
    return res.json().items as { id: number; name: string; sections: { title: string }[] }[];
  };

  it('lists and shows the built-in templates', async () => {
    const list = await run(['list']);
    expect(list.code, list.stderr).toBe(0);
    expect(
      list
        .json()
        .slice(0, 3)
        .map((tpl: { id: number; name: string }) => [tpl.id, tpl.name]),
    ).toEqual([
      [1, 'SOAP note'],
      [2, 'History and physical'],
      [3, 'Consultation note'],
    ]);
    const show = await run(['show', '2']);
    expect(show.json()).toMatchObject({
      id: 2,
      builtin: true,
      updated_at: null,
      document_type: { system: 'http://loinc.org', code: '34117-2', display: 'History and physical note' },
    });
    const missing = await run(['show', '4242']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('No template with id 4242');
  });

  it('creates a template with sections (ids from 1000) that the server lists and fills at once', async () => {
    const name = `Sports visit ${randomUUID()}`;
    const created = await run([
      'create',
      '--name',
      name,
      '--description',
      'Return-to-play check',
      '--loinc',
      '11506-3',
      '--loinc-display',
      'Progress note',
      '--section',
      'Injury: What happened and since when',
      '--section',
      'Examination: Findings',
      '--section',
      'Return to play: Clearance and restrictions',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const template = created.json();
    expect(template.id).toBeGreaterThanOrEqual(1000);
    expect(template).toMatchObject({
      name,
      description: 'Return-to-play check',
      builtin: false,
      document_type: { code: '11506-3' },
      sections: [
        { title: 'Injury', guidance: 'What happened and since when' },
        { title: 'Examination', guidance: 'Findings' },
        { title: 'Return to play', guidance: 'Clearance and restrictions' },
      ],
    });
    expect((await apiTemplates()).find((tpl) => tpl.id === template.id)?.name).toBe(name);

    const scribe = scribeClient(t.app, await t.token());
    const res = await scribe.submit({
      transcripts: ['Doctor: What happened?\nPatient: I twisted my ankle on Saturday.\nDoctor: Your ankle is tender.'],
      template_ids: [template.id],
    });
    expect(res.statusCode).toBe(202);
    const record = await scribe.finished(res.json().scribe_id);
    expect(record.notes[0].template_name).toBe(name);
    expect(record.notes[0].sections).toEqual([
      // "Injury" matches no title rule: a free section, which takes what no other section takes.
      { title: 'Injury', text: 'Doctor: What happened?\nPatient: I twisted my ankle on Saturday.' },
      { title: 'Examination', text: 'Doctor: Your ankle is tender.' },
      { title: 'Return to play', text: 'Not discussed.' },
    ]);
  });

  it('creates a template from JSON (as "show" prints it), defaulting the document type to LOINC 34109-9', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'template-'));
    const file = join(dir, 'template.json');
    writeFileSync(
      file,
      JSON.stringify({ name: 'Telehealth check-in', sections: [{ title: 'Summary' }, { title: 'Plan' }] }),
    );
    const created = await run(['create', '--json', file]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.json()).toMatchObject({
      document_type: { code: '34109-9', display: 'Note' },
      sections: [
        { title: 'Summary', guidance: '' },
        { title: 'Plan', guidance: '' },
      ],
    });
    const fromStdin = await run(
      ['create', '--json', '-'],
      JSON.stringify({ name: 'From stdin', sections: [{ title: 'A' }] }),
    );
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(fromStdin.json().id).toBe(created.json().id + 1);
  });

  it('updates a built-in template, which the server then uses, and resets it', async () => {
    const updated = await run([
      'update',
      '1',
      '--section',
      'Subjective: Patient story',
      '--section',
      'Plan: Next steps',
    ]);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.json()).toMatchObject({ id: 1, name: 'SOAP note', builtin: true, updated_at: expect.any(String) });
    expect((await apiTemplates()).find((tpl) => tpl.id === 1)?.sections.map((s) => s.title)).toEqual([
      'Subjective',
      'Plan',
    ]);

    const scribe = scribeClient(t.app, await t.token());
    const record = await scribe.finished(
      (await scribe.submit({ transcripts: ['Patient: Hi, I have a rash.'], template_ids: [1] })).json().scribe_id,
    );
    expect(record.notes[0].sections.map((s: { title: string }) => s.title)).toEqual(['Subjective', 'Plan']);

    const reset = await run(['reset', '1']);
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.json().sections).toHaveLength(4);
    expect((await apiTemplates()).find((tpl) => tpl.id === 1)?.sections).toHaveLength(4);
  });

  it('updates only what is named, round-tripping "show" output through --json', async () => {
    const created = (await run(['create', '--name', 'Round trip', '--section', 'One: first'])).json();
    const renamed = await run(['update', String(created.id), '--name', 'Round trip 2']);
    expect(renamed.json()).toMatchObject({ name: 'Round trip 2', sections: [{ title: 'One', guidance: 'first' }] });
    const shown = (await run(['show', String(created.id)])).stdout;
    const edited = JSON.stringify({ ...JSON.parse(shown), description: 'edited' });
    const viaJson = await run(['update', String(created.id), '--json', '-'], edited);
    expect(viaJson.code, viaJson.stderr).toBe(0);
    expect(viaJson.json()).toMatchObject({ name: 'Round trip 2', description: 'edited' });
  });

  it('refuses bad input with clear messages and exit codes', async () => {
    const cases: [string[], number, RegExp][] = [
      [[], 2, /Usage: ambient-fhir template/],
      [['frobnicate'], 2, /Unknown verb "frobnicate"/],
      [['create', '--section', 'A'], 2, /needs --name/],
      [['create', '--name', 'x'], 2, /at least one --section/],
      [['create', '--name', 'x', '--section', 'A', '--loinc', '123-4'], 2, /--loinc and --loinc-display go together/],
      [['create', '--name', 'x', '--section', 'A', '--loinc', 'abc', '--loinc-display', 'x'], 1, /not a LOINC code/],
      [['create', '--name', 'x', '--section', 'A', '--section', 'a'], 1, /used twice/],
      [['create', '--name', ' ', '--section', 'A'], 1, /name must not be empty/],
      [['update', '9999', '--name', 'x'], 1, /No template with id 9999/],
      [['update', '1'], 2, /name at least one change/],
      [['update', 'one', '--name', 'x'], 2, /not a template id/],
      [['reset', '1000'], 1, /not a built-in template/],
      [['create', '--json', '/does/not/exist.json'], 2, /--json \/does\/not\/exist\.json/],
    ];
    for (const [args, code, message] of cases) {
      const res = await run(args);
      expect(res.code, args.join(' ')).toBe(code);
      expect(res.stderr, args.join(' ')).toMatch(message);
    }
  });

  it('gives concurrent creates distinct ids', async () => {
    const store = new TemplateStore(db);
    // A second connection, as a second administrator's process has. (Not on SQLite: two connections of one
    // process would wait on each other's write lock inside one event loop; there, one connection serialises.)
    const other = backend === 'postgres' ? openDatabase(t.database.url) : db;
    try {
      const created = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          new TemplateStore(i % 2 ? other : db).create({
            name: `Concurrent ${i}`,
            description: '',
            documentType: { code: '34109-9', display: 'Note' },
            sections: [{ title: 'A', guidance: '' }],
          }),
        ),
      );
      expect(new Set(created.map((tpl) => tpl.id)).size).toBe(6);
      await expect(store.update(4242, { name: 'x' })).rejects.toBeInstanceOf(TemplateError);
    } finally {
      if (other !== db) await other.close();
    }
  });
});
