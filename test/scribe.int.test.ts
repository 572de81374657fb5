// The scribe records API through HTTP as a client sees it (docs/api.md "Scribe"), on both databases, with
// the built-in note generator: create (JSON, multipart, URL-encoded), every 4xx, privacy between accounts,
// paging, templates, completion, and the note filed as a DocumentReference in the FHIR store.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCRIBE_ID_SYSTEM } from '../src/scribe/document-reference.js';
import { multipartBody, SCRIBE, scribeClient, TEMPLATES } from './support/scribe-client.js';
import type { ScribeClient } from './support/scribe-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const VISIT = `Doctor: Good morning. What brings you in today?
Patient: I've had a sore throat for three days.
Doctor: Any fever?
Patient: Yes, up to 101 last night.
Doctor: Any allergies to medications?
Patient: Penicillin gives me hives.
Doctor: Let me take a look. Your throat is red and your tonsils are swollen. Temperature is 100.8 degrees.
Doctor: The rapid strep test came back positive.
Doctor: This is most likely strep throat. I'll prescribe azithromycin since you're allergic to penicillin, and come back if it is not better in three days.
Patient: Thank you, doctor.`;

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe.each(BACKENDS)('scribe API on %s', (backend) => {
  let t: TestApp;
  let token: string;
  let scribe: ScribeClient;
  let fhir: FhirClient;

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_SCRIBE_POLL_MS: '50' });
    token = await t.token();
    scribe = scribeClient(t.app, token);
    fhir = fhirClient(t.app, token);
  });
  afterAll(async () => t?.close());

  const createResource = async (resource: { resourceType: string; [k: string]: unknown }): Promise<string> => {
    const res = await fhir.create(resource);
    expect(res.statusCode).toBe(201);
    return `${resource.resourceType as string}/${res.json().id as string}`;
  };
  const readFhir = async (reference: string) => fhir.get(`/fhir/${reference}`);

  const oauthError = (res: { statusCode: number; json(): any }, status: number, error: string, description: RegExp) => {
    expect(res.statusCode).toBe(status);
    expect(res.json()).toEqual({ error, error_description: expect.stringMatching(description) });
  };

  describe('create and complete', () => {
    it('accepts JSON with 202 {scribe_id, status, submitted_at}, then completes with a SOAP note filed in FHIR', async () => {
      const patient = await createResource({ resourceType: 'Patient', name: [{ family: 'Scribe', given: ['Ana'] }] });
      const encounter = await createResource({
        resourceType: 'Encounter',
        status: 'finished',
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
        subject: { reference: patient },
      });
      const res = await scribe.submit({
        transcripts: [VISIT],
        template_ids: [1],
        patient_name: 'Ana Scribe',
        date_of_service: '2024-05-01',
        additional_context: { visit_type: 'sick visit' },
        patient,
        encounter,
      });
      expect(res.statusCode).toBe(202);
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(['scribe_id', 'status', 'submitted_at']);
      expect(Number.isInteger(body.scribe_id)).toBe(true);
      expect(body.status).toBe('IN_PROGRESS');
      expect(body.submitted_at).toMatch(ISO_INSTANT);
      expect(res.headers.location).toBe(`${t.config.publicUrl}${SCRIBE}/${body.scribe_id}`);
      expect(res.headers['cache-control']).toBe('no-store');

      const record = await scribe.finished(body.scribe_id);
      expect(record).toMatchObject({
        scribe_id: body.scribe_id,
        status: 'COMPLETED',
        submitted_at: body.submitted_at,
        patient_name: 'Ana Scribe',
        date_of_service: '2024-05-01',
        additional_context: { visit_type: 'sick visit' },
        patient,
        encounter,
        template_ids: [1],
        transcripts: [VISIT],
        error: null,
      });
      expect(Object.keys(record).sort()).toEqual(
        [
          'scribe_id',
          'status',
          'submitted_at',
          'completed_at',
          'patient_name',
          'date_of_service',
          'additional_context',
          'patient',
          'encounter',
          'template_ids',
          'transcripts',
          'notes',
          'error',
        ].sort(),
      );
      expect(record.completed_at).toMatch(ISO_INSTANT);
      expect(Date.parse(record.completed_at)).toBeGreaterThanOrEqual(Date.parse(record.submitted_at));
      expect(record.notes).toHaveLength(1);
      const [note] = record.notes;
      expect(note.template_id).toBe(1);
      expect(note.template_name).toBe('SOAP note');
      expect(note.sections.map((s: { title: string }) => s.title)).toEqual([
        'Subjective',
        'Objective',
        'Assessment',
        'Plan',
      ]);
      const text = Object.fromEntries(note.sections.map((s: { title: string; text: string }) => [s.title, s.text]));
      expect(text.Subjective).toContain("Patient: I've had a sore throat for three days.");
      expect(text.Subjective).toContain('Doctor: Any allergies to medications?\nPatient: Penicillin gives me hives.');
      expect(text.Objective).toContain('Your throat is red');
      expect(text.Objective).toContain('rapid strep test came back positive');
      expect(text.Assessment).toBe('Doctor: This is most likely strep throat.');
      expect(text.Plan).toContain("I'll prescribe azithromycin");
      expect(note.document_reference).toMatch(/^DocumentReference\/[A-Za-z0-9\-.]{1,64}$/);

      const doc = await readFhir(note.document_reference);
      expect(doc.statusCode).toBe(200);
      const resource = doc.json();
      expect(resource).toMatchObject({
        resourceType: 'DocumentReference',
        status: 'current',
        type: { coding: [{ system: 'http://loinc.org', code: '11506-3' }] },
        subject: { reference: patient },
        context: { encounter: [{ reference: encounter }], period: { start: '2024-05-01' } },
        identifier: [{ system: SCRIBE_ID_SYSTEM, value: String(body.scribe_id) }],
        meta: { versionId: '1' },
      });
      const attachment = resource.content[0].attachment;
      expect(attachment.contentType).toMatch(/^text\/plain/);
      const filed = Buffer.from(attachment.data, 'base64').toString('utf8');
      expect(filed).toContain('SOAP note');
      expect(filed).toContain('Patient name: Ana Scribe');
      expect(filed).toContain(`Scribe record: ${body.scribe_id}`);
      for (const section of note.sections) expect(filed).toContain(`${section.title}\n`);
      expect(filed).toContain(text.Assessment);
    });

    it('accepts multipart/form-data with repeated fields and files two notes (SOAP 11506-3, H&P 34117-2)', async () => {
      const patient = await createResource({ resourceType: 'Patient', gender: 'female' });
      const res = await scribe.submitForm([
        ['transcripts', 'Doctor: What brings you in?\nPatient: My knee hurts since Saturday.'],
        ['transcripts', 'Doctor: Your knee is swollen and tender.\nDoctor: I will order an x-ray.'],
        ['template_ids', '1'],
        ['template_ids', '2'],
        ['patient', patient],
        ['date_of_service', '2024-06-02T14:30:00+02:00'],
        ['additional_context', '{"referral": "sports clinic"}'],
      ]);
      expect(res.statusCode).toBe(202);
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.status).toBe('COMPLETED');
      expect(record.transcripts).toHaveLength(2);
      expect(record.template_ids).toEqual([1, 2]);
      expect(record.additional_context).toEqual({ referral: 'sports clinic' });
      expect(record.date_of_service).toBe('2024-06-02T14:30:00+02:00');
      expect(record.encounter).toBeNull();
      expect(
        record.notes.map((n: { template_id: number; template_name: string }) => [n.template_id, n.template_name]),
      ).toEqual([
        [1, 'SOAP note'],
        [2, 'History and physical'],
      ]);
      const hp = record.notes[1];
      expect(hp.sections[0]).toEqual({
        title: 'Chief Complaint',
        text: 'Doctor: What brings you in?\nPatient: My knee hurts since Saturday.',
      });
      const codes = [];
      for (const note of record.notes) {
        const resource = (await readFhir(note.document_reference)).json();
        codes.push(resource.type.coding[0].code);
        expect(resource.subject).toEqual({ reference: patient });
        expect(resource.context).toEqual({ period: { start: '2024-06-02T14:30:00+02:00' } });
      }
      expect(codes).toEqual(['11506-3', '34117-2']);
    });

    it('accepts a transcript uploaded as a text file part, and template_ids[]', async () => {
      const res = await scribe.submitForm([
        [
          'transcripts',
          { filename: 'visit.txt', contentType: 'text/plain', data: 'Patient: I have a rash on my arm.' },
        ],
        ['template_ids[]', '1'],
      ]);
      expect(res.statusCode).toBe(202);
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.transcripts).toEqual(['Patient: I have a rash on my arm.']);
      expect(record.patient).toBeNull();
      const resource = (await readFhir(record.notes[0].document_reference)).json();
      expect(resource.subject).toBeUndefined();
      expect(resource.context).toBeUndefined();
    });

    it('accepts application/x-www-form-urlencoded with repeated fields', async () => {
      const form = new URLSearchParams([
        ['transcripts', 'Patient: Headache.'],
        ['transcripts', 'Doctor: Take ibuprofen.'],
        ['template_ids', '3'],
      ]);
      const res = await fhir.postForm(SCRIBE, form.toString());
      expect(res.statusCode).toBe(202);
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.notes[0].template_name).toBe('Consultation note');
      expect((await readFhir(record.notes[0].document_reference)).json().type.coding[0].code).toBe('11488-4');
    });

    it('finds the note with GET /fhir/DocumentReference?patient=Patient/<id>', async () => {
      const patient = await createResource({ resourceType: 'Patient', name: [{ family: `Search${randomUUID()}` }] });
      const res = await scribe.submit({ transcripts: ['Patient: I feel dizzy.'], template_ids: [1, 2], patient });
      const record = await scribe.finished(res.json().scribe_id);
      const search = await fhir.get(`/fhir/DocumentReference?patient=${patient}`);
      expect(search.statusCode).toBe(200);
      const bundle = search.json();
      expect(bundle.resourceType).toBe('Bundle');
      const found = (bundle.entry ?? [])
        .filter((e: { search?: { mode?: string } }) => e.search?.mode !== 'include')
        .map((e: { resource: { resourceType: string; id: string } }) => `${e.resource.resourceType}/${e.resource.id}`)
        .sort();
      expect(found).toEqual(record.notes.map((n: { document_reference: string }) => n.document_reference).sort());
    });
  });

  describe('read and list', () => {
    it('answers 404 for an unknown id and for ids that are not ids, in the OAuth error shape', async () => {
      oauthError(await scribe.get(987654321), 404, 'not_found', /987654321/);
      oauthError(await scribe.get('abc'), 404, 'not_found', /abc/);
      oauthError(await scribe.get('99999999999999999999'), 404, 'not_found', /./);
    });

    it("keeps each account's records private: 404 for another account's record, and not in its list", async () => {
      const mine = (await scribe.submit({ transcripts: ['Patient: Private.'], template_ids: [1] })).json().scribe_id;
      const other = scribeClient(t.app, await t.token());
      const res = await other.get(mine);
      const unknown = await other.get(987654322);
      oauthError(res, 404, 'not_found', new RegExp(String(mine)));
      // The same answer as for an id that never existed: nothing tells them apart.
      expect(res.json().error_description.replace(String(mine), 'N')).toBe(
        unknown.json().error_description.replace('987654322', 'N'),
      );
      const list = await other.list();
      expect(list.statusCode).toBe(200);
      expect(list.json()).toEqual({ items: [], next_cursor: null });
      expect((await scribe.get(mine)).statusCode).toBe(200);
    });

    it('lists the caller’s records newest first, in pages that visit each once', async () => {
      const client = scribeClient(t.app, await t.token());
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await client.submit({ transcripts: [`Patient: Visit ${i}.`], template_ids: [1] })).json().scribe_id);
      }
      const seen: number[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res = await client.list(`?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(res.statusCode).toBe(200);
        const page = res.json();
        expect(page.items.length).toBeLessThanOrEqual(2);
        for (const item of page.items) {
          expect(item).toHaveProperty('status');
          expect(item).toHaveProperty('transcripts');
          seen.push(item.scribe_id);
        }
        cursor = page.next_cursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(3);
      expect(seen).toEqual([...ids].reverse());
      const all = (await client.list()).json();
      expect(all.items.map((r: { scribe_id: number }) => r.scribe_id)).toEqual([...ids].reverse());
      expect(all.next_cursor).toBeNull();
    });

    it('refuses a bad limit or cursor with 400 naming it', async () => {
      for (const limit of ['0', '101', 'abc', '1.5', '-1']) {
        oauthError(await scribe.list(`?limit=${limit}`), 400, 'invalid_request', /^limit: /);
      }
      oauthError(await scribe.list('?cursor=not-a-cursor'), 400, 'invalid_request', /^cursor: /);
    });

    it('refuses a cursor altered, forged or of another account with 400 naming it', async () => {
      const client = scribeClient(t.app, await t.token());
      for (let i = 0; i < 2; i++) await client.submit({ transcripts: [`Patient: Visit ${i}.`], template_ids: [1] });
      const cursor = (await client.list('?limit=1')).json().next_cursor as string;
      const [payload, mac] = cursor.split('.');
      const [before] = JSON.parse(Buffer.from(payload, 'base64url').toString());
      const altered = `${Buffer.from(JSON.stringify([before + 1])).toString('base64url')}.${mac}`;
      const unsigned = Buffer.from(`before:${before}`).toString('base64url');
      for (const bad of [altered, unsigned]) {
        oauthError(await client.list(`?limit=1&cursor=${bad}`), 400, 'invalid_request', /^cursor: /);
      }
      oauthError(await scribe.list(`?limit=1&cursor=${cursor}`), 400, 'invalid_request', /^cursor: /);
      expect((await client.list(`?limit=1&cursor=${cursor}`)).statusCode).toBe(200);
    });
  });

  describe('templates', () => {
    it('lists the built-in templates with stable ids and LOINC document types', async () => {
      const res = await fhir.get(TEMPLATES);
      expect(res.statusCode).toBe(200);
      const { items } = res.json();
      const byId = Object.fromEntries(items.map((tpl: { id: number }) => [tpl.id, tpl]));
      expect(byId[1]).toMatchObject({
        name: 'SOAP note',
        document_type: { system: 'http://loinc.org', code: '11506-3' },
        builtin: true,
      });
      expect(byId[1].sections.map((s: { title: string }) => s.title)).toEqual([
        'Subjective',
        'Objective',
        'Assessment',
        'Plan',
      ]);
      expect(byId[2]).toMatchObject({ name: 'History and physical', document_type: { code: '34117-2' } });
      expect(byId[3]).toMatchObject({ name: 'Consultation note', document_type: { code: '11488-4' } });
      for (const tpl of items) for (const s of tpl.sections) expect(typeof s.guidance).toBe('string');
      const one = await fhir.get(`${TEMPLATES}/2`);
      expect(one.json()).toEqual(byId[2]);
      const none = await fhir.get(`${TEMPLATES}/999`);
      oauthError(none, 404, 'not_found', /999/);
    });
  });

  describe('errors', () => {
    it.each([
      ['no transcripts', { template_ids: [1] }, /transcripts: required/],
      ['an empty transcript', { transcripts: [''], template_ids: [1] }, /transcripts: must not be empty/],
      ['a transcript that is not a string', { transcripts: [{}], template_ids: [1] }, /transcripts: must be a string/],
      ['no template_ids', { transcripts: ['x'] }, /template_ids: required/],
      [
        'a malformed template id',
        { transcripts: ['x'], template_ids: ['soap'] },
        /template_ids: "soap" is not a template id/,
      ],
      ['a malformed patient_name', { transcripts: ['x'], template_ids: [1], patient_name: ['a', 'b'] }, /patient_name/],
      [
        'a malformed date_of_service',
        { transcripts: ['x'], template_ids: [1], date_of_service: '1 May' },
        /date_of_service: /,
      ],
      [
        'additional_context that is not JSON',
        { transcripts: ['x'], template_ids: [1], additional_context: '{' },
        /additional_context: /,
      ],
      [
        'additional_context that is an array',
        { transcripts: ['x'], template_ids: [1], additional_context: [1] },
        /additional_context: /,
      ],
      [
        'a malformed patient reference',
        { transcripts: ['x'], template_ids: [1], patient: '123' },
        /patient: must be a reference/,
      ],
      [
        'a malformed encounter reference',
        { transcripts: ['x'], template_ids: [1], encounter: 'Patient/1' },
        /encounter: must be a reference/,
      ],
      ['an unknown field', { transcripts: ['x'], template_ids: [1], templates: [1] }, /"templates": unknown field/],
    ])('400 for %s, naming the field', async (_what, body, message) => {
      oauthError(await scribe.submit(body), 400, 'invalid_request', message);
    });

    it('400 for an unknown template', async () => {
      oauthError(
        await scribe.submit({ transcripts: ['x'], template_ids: [1, 998] }),
        400,
        'invalid_request',
        /template_ids: no template with id 998/,
      );
    });

    it('400 for references to nothing (never created, deleted) and for an encounter of another patient', async () => {
      oauthError(
        await scribe.submit({ transcripts: ['x'], template_ids: [1], patient: 'Patient/does-not-exist' }),
        400,
        'invalid_request',
        /patient: Patient\/does-not-exist does not exist/,
      );
      oauthError(
        await scribe.submit({ transcripts: ['x'], template_ids: [1], encounter: 'Encounter/nope' }),
        400,
        'invalid_request',
        /encounter: Encounter\/nope does not exist/,
      );
      const deleted = await createResource({ resourceType: 'Patient' });
      await fhir.delete(`/fhir/${deleted}`);
      oauthError(
        await scribe.submit({ transcripts: ['x'], template_ids: [1], patient: deleted }),
        400,
        'invalid_request',
        /patient: .* does not exist/,
      );
      const [a, b] = [
        await createResource({ resourceType: 'Patient' }),
        await createResource({ resourceType: 'Patient' }),
      ];
      const encounter = await createResource({
        resourceType: 'Encounter',
        status: 'finished',
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
        subject: { reference: a },
      });
      oauthError(
        await scribe.submit({ transcripts: ['x'], template_ids: [1], patient: b, encounter }),
        400,
        'invalid_request',
        /encounter: .* is an encounter of Patient\/.*, not of Patient\//,
      );
    });

    it('400 for audio_files when no speech-to-text engine is configured, saying so', async () => {
      const res = await scribe.submitForm([
        ['audio_files', { filename: 'visit.wav', contentType: 'audio/wav', data: Buffer.from('RIFF0000WAVE') }],
        ['template_ids', '1'],
      ]);
      oauthError(res, 400, 'invalid_request', /audio_files: this server has no speech-to-text engine/);
    });

    it('400 for a body that is not an object, 400 for malformed JSON, 415 for another content type', async () => {
      const post = (payload: string, contentType: string) =>
        fhir.post(SCRIBE, payload, { 'content-type': contentType });
      oauthError(await post('[1]', 'application/json'), 400, 'invalid_request', /JSON object/);
      oauthError(await post('{"transcripts":', 'application/json'), 400, 'invalid_request', /not valid JSON/);
      oauthError(await post('<xml/>', 'application/xml'), 415, 'invalid_request', /multipart\/form-data/);
    });

    it('401 without a good token, with WWW-Authenticate', async () => {
      for (const authorization of [undefined, 'Bearer nope', `bearer  ${token}`, token]) {
        const headers: Record<string, string> = authorization ? { authorization } : {};
        for (const res of [
          await t.app.inject({ method: 'GET', url: `${SCRIBE}/1`, headers }),
          await t.app.inject({ method: 'GET', url: SCRIBE, headers }),
          await t.app.inject({ method: 'GET', url: TEMPLATES, headers }),
          await t.app.inject({
            method: 'POST',
            url: SCRIBE,
            headers: { ...headers, 'content-type': 'application/json' },
            payload: '{}',
          }),
        ]) {
          expect(res.statusCode).toBe(401);
          expect(res.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
          expect(res.json().error).toBe('invalid_token');
        }
      }
    });

    it('403 without the scribe scope a request needs', async () => {
      const readOnly = scribeClient(t.app, await t.token('scribe.read system/*.cruds'));
      oauthError(
        await readOnly.submit({ transcripts: ['x'], template_ids: [1] }),
        403,
        'insufficient_scope',
        /scribe\.write/,
      );
      expect((await readOnly.list()).statusCode).toBe(200);
      const writeOnly = scribeClient(t.app, await t.token('scribe.write system/*.cruds'));
      const created = await writeOnly.submit({ transcripts: ['x'], template_ids: [1] });
      expect(created.statusCode).toBe(202);
      oauthError(await writeOnly.get(created.json().scribe_id), 403, 'insufficient_scope', /scribe\.read/);
      oauthError(await writeOnly.list(), 403, 'insufficient_scope', /scribe\.read/);
      const templates = await (await t.client('system/*.cruds')).get(TEMPLATES);
      oauthError(templates, 403, 'insufficient_scope', /scribe\.read/);
    });

    it('403 when the caller may not read the referenced patient', async () => {
      const patient = await createResource({ resourceType: 'Patient' });
      const noPatients = scribeClient(t.app, await t.token('scribe.read scribe.write system/Encounter.rs'));
      oauthError(
        await noPatients.submit({ transcripts: ['x'], template_ids: [1], patient }),
        403,
        'insufficient_scope',
        /patient: .*reading Patient/,
      );
    });

    it('405 for other methods, with Allow', async () => {
      const res = await fhir.delete(`${SCRIBE}/1`);
      expect(res.statusCode).toBe(405);
      expect(res.headers.allow).toBe('GET');
      expect(res.json().error).toBe('invalid_request');
      const put = await fhir.put(SCRIBE);
      expect(put.headers.allow).toBe('GET, POST');
    });

    it('never answers odd input with a 500: NUL, lone surrogates, huge numbers, control characters', async () => {
      const odd = await scribe.submit({
        transcripts: ['Patient: a\u0000b \ud800 \uffff 𝄞 مرحبا'],
        template_ids: [1],
        additional_context: { 'k\u0000': 'v\u0000' },
      });
      expect(odd.statusCode).toBe(202);
      const record = await scribe.finished(odd.json().scribe_id);
      expect(record.status).toBe('COMPLETED');
      expect(record.transcripts[0]).toContain('a\u0000b');
      expect(record.additional_context).toEqual({ 'k\u0000': 'v\u0000' });
      oauthError(
        await scribe.submit({ transcripts: ['x'], template_ids: [1], patient_name: 'A\u0000B' }),
        400,
        'invalid_request',
        /patient_name: must not contain control characters/,
      );
      const huge = await fhir.post(SCRIBE, '{"transcripts": ["x"], "template_ids": [1e400, 12345678901234567890]}', {
        'content-type': 'application/json',
      });
      oauthError(huge, 400, 'invalid_request', /template_ids: null is not a template id.*12345678901234567000 is not/);
    });

    it('413 for a body over AMBIENT_MAX_BODY_BYTES', async () => {
      const { payload, headers } = await multipartBody([
        ['transcripts', 'x'.repeat(t.config.maxBodyBytes + 10)],
        ['template_ids', '1'],
      ]);
      const res = await fhir.post(SCRIBE, payload, headers);
      expect(res.statusCode).toBe(413);
    });
  });
});
